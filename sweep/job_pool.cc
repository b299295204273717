#include "sweep/job_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/errors.h"
#include "base/check.h"

namespace ahbm::sweep {

namespace {

struct Child {
  pid_t pid;
  int fd;  // the pipe's read end
  size_t index;
  size_t name;  // the index failures name ("job <name>: ...")
  std::string bytes;
};

// Writes all of `bytes` to `fd`; false on an error.
bool WriteAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A finished child's result: its bytes when it exited 0, else how it ended.
absl::StatusOr<std::string> Reap(Child& child) {
  int wstatus = 0;
  while (waitpid(child.pid, &wstatus, 0) < 0) {
    AHBM_CHECK(errno == EINTR) << "waitpid: " << std::strerror(errno);
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return std::move(child.bytes);
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    return absl::InternalError(
        absl::StrCat("job ", child.name, ": killed by signal ", sig, " (", strsignal(sig), ")"));
  }
  return absl::InternalError(
      absl::StrCat("job ", child.name, ": exited with code ", WEXITSTATUS(wstatus)));
}

}  // namespace

int DefaultWorkers() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

std::vector<absl::StatusOr<std::string>> ForkEach(
    size_t n, int workers, const std::function<std::string(size_t)>& work,
    const std::function<void(size_t, const absl::StatusOr<std::string>&)>& on_done,
    const std::vector<size_t>& names) {
  AHBM_CHECK(names.empty() || names.size() == n) << names.size() << " names for " << n;
  AHBM_CHECK(workers >= 1) << "workers " << workers;
  std::vector<absl::StatusOr<std::string>> results(n, absl::InternalError("not run"));
  std::vector<Child> running;
  size_t next = 0;
  while (next < n || !running.empty()) {
    while (next < n && running.size() < static_cast<size_t>(workers)) {
      const size_t index = next++;
      int fds[2];
      AHBM_CHECK(pipe(fds) == 0) << "pipe: " << std::strerror(errno);
      std::fflush(nullptr);
      const pid_t pid = fork();
      AHBM_CHECK(pid >= 0) << "fork: " << std::strerror(errno);
      if (pid == 0) {
        close(fds[0]);
        const bool sent = WriteAll(fds[1], work(index));
        std::fflush(nullptr);
        _exit(sent ? 0 : 1);
      }
      close(fds[1]);
      running.push_back(Child{pid, fds[0], index, names.empty() ? index : names[index], {}});
    }
    std::vector<pollfd> polled;
    for (const Child& c : running) polled.push_back(pollfd{c.fd, POLLIN, 0});
    if (poll(polled.data(), polled.size(), -1) < 0) {
      AHBM_CHECK(errno == EINTR) << "poll: " << std::strerror(errno);
      continue;
    }
    for (size_t i = running.size(); i-- > 0;) {
      if (polled[i].revents == 0) continue;
      char buffer[1 << 16];
      const ssize_t got = read(running[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) {
        running[i].bytes.append(buffer, static_cast<size_t>(got));
        continue;
      }
      close(running[i].fd);  // EOF (or a read error): the child is done
      results[running[i].index] = Reap(running[i]);
      if (on_done) on_done(running[i].index, results[running[i].index]);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return results;
}

JobPool::JobPool(int workers) : workers_(workers) {
  AHBM_CHECK(workers >= 1) << "JobPool: workers " << workers;
}

namespace {

// The bytes a child sent, as its job's result (a failure when the child died or cut it short).
pb::JobResult ParseChildResult(size_t index, const absl::StatusOr<std::string>& bytes) {
  pb::JobResult result;
  absl::Status failed = bytes.status();
  if (failed.ok() && !result.ParseFromString(*bytes)) {
    failed = absl::InternalError(absl::StrCat("job ", index, ": result cut short"));
  }
  return failed.ok() ? result : FailedResult(failed);
}

}  // namespace

std::vector<pb::JobResult> JobPool::RunNamed(const std::vector<Job>& jobs,
                                             const std::vector<size_t>& names,
                                             const Done& on_done) {
  AHBM_CHECK(names.size() == jobs.size()) << names.size() << " names for " << jobs.size();
  const auto work = [&jobs](size_t i) { return ExecuteJob(jobs[i]).SerializeAsString(); };
  std::vector<pb::JobResult> results(jobs.size());
  const auto parse = [&](size_t i, const absl::StatusOr<std::string>& bytes) {
    results[i] = ParseChildResult(names[i], bytes);
    if (on_done) on_done(names[i], results[i]);
  };
  ForkEach(jobs.size(), workers_, work, parse, names);
  return results;
}

namespace {

std::string& JobProgram() {
  static std::string program;
  return program;
}

bool ReadAll(int fd, std::string* out) {
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buffer, static_cast<size_t>(n));
  }
}

// `<program> __job` with `spec` on its stdin: its stdout, or how it ended.
absl::StatusOr<std::string> SpawnJob(const std::string& program, const std::string& spec,
                                     size_t index) {
  int in[2], out[2];
  AHBM_CHECK(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0)
      << "pipe: " << std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::string arg0 = program, arg1 = kJobCommand;
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  if (spawned != 0) {
    close(in[1]);
    close(out[0]);
    return absl::InternalError(absl::StrCat("job ", index, ": cannot start ", program, ": ",
                                            std::strerror(spawned)));
  }
  // The child reads all of its stdin before it writes: write, close, then read.
  WriteAll(in[1], spec);
  close(in[1]);
  Child child{pid, out[0], 0, index, {}};
  const bool read_ok = ReadAll(out[0], &child.bytes);
  close(out[0]);
  absl::StatusOr<std::string> result = Reap(child);
  if (result.ok() && !read_ok) {
    return absl::InternalError(absl::StrCat("job ", index, ": reading its result failed"));
  }
  return result;
}

}  // namespace

void UseJobProgram(const std::string& program) {
  JobProgram() = program;
  signal(SIGPIPE, SIG_IGN);  // a child that died before reading its stdin is its job's failure
}

int JobChildMain() {
  std::string bytes;
  pb::JobSpec spec;
  if (!ReadAll(0, &bytes) || !spec.ParseFromString(bytes)) {
    std::fprintf(stderr, "ahbm %s: stdin holds no JobSpec (%zu bytes)\n", kJobCommand,
                 bytes.size());
    return 2;
  }
  absl::StatusOr<Job> job = FromSpec(spec);
  if (!job.ok()) {
    std::fprintf(stderr, "ahbm %s: %s\n", kJobCommand,
                 std::string(job.status().message()).c_str());
    return 2;
  }
  const std::string result = ExecuteJob(*job).SerializeAsString();
  std::fflush(nullptr);
  return WriteAll(1, result) ? 0 : 1;
}

pb::JobResult ExecuteInChild(const Job& job, size_t index) {
  if (const std::string& program = JobProgram(); !program.empty()) {
    absl::StatusOr<pb::JobSpec> spec = ToSpec(job);
    if (!spec.ok()) {
      return FailedResult(Annotate(spec.status(), absl::StrCat("job ", index, ": ")));
    }
    return ParseChildResult(index, SpawnJob(program, spec->SerializeAsString(), index));
  }
  std::vector<absl::StatusOr<std::string>> bytes = ForkEach(
      1, 1, [&job](size_t) { return ExecuteJob(job).SerializeAsString(); }, nullptr, {index});
  return ParseChildResult(index, bytes[0]);
}



}  // namespace ahbm::sweep
