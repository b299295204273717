// `ahbm`: the ahbmsim command line (DESIGN §6).
//   ahbm validate [--topology=F]   check a topology and print its one-screen summary
//   ahbm help [command]
// Exit codes: 0 success, 2 bad input (one line naming the field and the reason),
// 3 kernel deadlock (once kernels exist), 1 anything else.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/flags.h"
#include "topology/loader.h"
#include "topology/summary.h"

namespace ahbm::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr char kDefaultTopology[] = "topology/chip_4sip.textproto";

struct Command {
  std::string name;
  std::string summary;
  std::vector<FlagSpec> flags;
  std::function<absl::Status(const ParsedFlags&)> run;
};

absl::Status RunValidate(const ParsedFlags& flags) {
  const std::string path = flags.GetOr("topology", kDefaultTopology);
  absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile(path);
  if (!chip.ok()) return chip.status();
  std::fputs(topology::TopologySummary(*chip).c_str(), stdout);
  std::printf("%s: valid\n", path.c_str());
  return absl::OkStatus();
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"validate",
       "check a topology config and print its summary (units, peak bandwidth and FLOP/s)",
       {{"topology", "chip config, protobuf text format (ahbm.pb.Chip)", kDefaultTopology}},
       RunValidate},
  };
  return commands;
}

std::string Usage() {
  std::string out = "usage: ahbm <command> [--flag=value ...]\n\ncommands:\n";
  for (const Command& command : Commands()) {
    absl::StrAppend(&out, "  ", command.name, std::string(12 - command.name.size(), ' '),
                    command.summary, "\n");
  }
  absl::StrAppend(&out, "  help        this text, or 'ahbm help <command>' for its flags\n");
  return out;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

int Help(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(Usage().c_str(), stdout);
    return kExitOk;
  }
  const Command* command = FindCommand(args[0]);
  if (command == nullptr) {
    std::fprintf(stderr, "ahbm: unknown command '%s'\n", args[0].c_str());
    return kExitBadInput;
  }
  std::printf("ahbm %s: %s\n\nflags:\n%s", command->name.c_str(), command->summary.c_str(),
              FlagsHelp(command->flags).c_str());
  return kExitOk;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(Usage().c_str(), stderr);
    return kExitBadInput;
  }
  const std::string name = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (name == "help" || name == "--help" || name == "-h") return Help(args);
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "ahbm: unknown command '%s' (see 'ahbm help')\n", name.c_str());
    return kExitBadInput;
  }
  absl::StatusOr<ParsedFlags> flags = ParseFlags(name, command->flags, args);
  absl::Status status = flags.ok() ? command->run(*flags) : flags.status();
  if (status.ok()) return kExitOk;
  std::fprintf(stderr, "ahbm %s: %s\n", name.c_str(), std::string(status.message()).c_str());
  return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ? kExitBadInput : 1;
}

}  // namespace
}  // namespace ahbm::cli

int main(int argc, char** argv) { return ahbm::cli::Main(argc, argv); }
