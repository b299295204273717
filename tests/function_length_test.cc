// No function in actors/ or kernels/ (tests aside) runs over 120 lines, so that a reader holds
// each in one sitting; the few that do are listed below with the reason, and a listed one that
// shrank must leave the list. Lines are counted from the first line of the signature to the
// closing brace, after comments and string literals are blanked; a function body is a brace
// block, outside another function, whose head (the text since the last ';', '{' or '}') has a
// ')' and is not a namespace, class, struct, enum, union or initializer.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ahbm {
namespace {

constexpr int kMaxLines = 120;

// path -> the first line of the function's signature, trimmed, and why it stays long. None
// today: a function that must stay long is listed here with its reason.
const std::map<std::string, std::map<std::string, std::string>> kExceptions = {};

// `src` with comments, string and character literals blanked (newlines kept).
std::string Blank(const std::string& src) {
  std::string out = src;
  size_t i = 0;
  const size_t n = src.size();
  const auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < n; ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  while (i < n) {
    if (src.compare(i, 2, "//") == 0) {
      const size_t end = std::min(src.find('\n', i), n);
      blank(i, end);
      i = end;
    } else if (src.compare(i, 2, "/*") == 0) {
      const size_t close = src.find("*/", i + 2);
      const size_t end = close == std::string::npos ? n : close + 2;
      blank(i, end);
      i = end;
    } else if (src.compare(i, 2, "R\"") == 0) {
      const size_t open = src.find('(', i);
      const std::string delim = ")" + src.substr(i + 2, open - i - 2) + "\"";
      const size_t close = src.find(delim, open);
      const size_t end = close == std::string::npos ? n : close + delim.size();
      blank(i, end);
      i = end;
    } else if (src[i] == '"' || src[i] == '\'') {
      const char quote = src[i];
      size_t j = i + 1;
      while (j < n && src[j] != quote) j += src[j] == '\\' ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else {
      ++i;
    }
  }
  return out;
}

bool HasWord(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool left = at == 0 || !(isalnum(text[at - 1]) || text[at - 1] == '_');
    const size_t end = at + word.size();
    const bool right = end >= text.size() || !(isalnum(text[end]) || text[end] == '_');
    if (left && right) return true;
  }
  return false;
}

struct LongFunction {
  int lines = 0;
  std::string signature;  // its first line, trimmed
};

std::vector<LongFunction> LongFunctions(const std::string& source) {
  const std::string s = Blank(source);
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  enum class Kind { kOther, kScope, kFunction };
  struct Open {
    Kind kind;
    int line;
  };
  std::vector<Open> stack;
  size_t last = 0;
  int line = 1;
  std::vector<LongFunction> out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n') ++line;
    if (c == '{') {
      const std::string head = s.substr(last, i - last);
      const bool in_function = std::any_of(stack.begin(), stack.end(),
                                           [](const Open& o) { return o.kind == Kind::kFunction; });
      Kind kind = Kind::kOther;
      if (!in_function) {
        const size_t close = head.rfind(')');
        const size_t tail = head.find_last_not_of(" \t\n");
        const bool initializer = tail != std::string::npos && head[tail] == '=';
        if (HasWord(head, "namespace") ||
            ((HasWord(head, "class") || HasWord(head, "struct") || HasWord(head, "enum") ||
              HasWord(head, "union")) &&
             close == std::string::npos)) {
          kind = Kind::kScope;
        } else if (close != std::string::npos && !initializer) {
          kind = Kind::kFunction;
        }
      }
      // The block starts where its head's text does (a signature over several lines).
      const size_t first = std::min(head.find_first_not_of(" \t\n"), head.size());
      const int start = line - static_cast<int>(std::count(head.begin() + first, head.end(), '\n'));
      stack.push_back(Open{kind, start});
      last = i + 1;
    } else if (c == '}') {
      if (!stack.empty()) {
        const Open open = stack.back();
        stack.pop_back();
        if (open.kind == Kind::kFunction && line - open.line + 1 > kMaxLines) {
          std::string sig = lines[open.line - 1];
          sig.erase(0, sig.find_first_not_of(" \t"));
          out.push_back(LongFunction{line - open.line + 1, sig});
        }
      }
      last = i + 1;
    } else if (c == ';') {
      last = i + 1;
    }
  }
  return out;
}

TEST(FunctionLength, TheCounterSeesFunctionsNotScopes) {
  std::string body;
  for (int i = 0; i < kMaxLines; ++i) body += "  x += 1;  // {\n";
  const std::string src = "namespace a {\nstruct S {\n  int F(int y) const {\n" + body +
                          "  }\n};\nconst char* k = \"}\";\nint G() {\n  return 1;\n}\n}  // a\n";
  const std::vector<LongFunction> found = LongFunctions(src);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].signature, "int F(int y) const {");
  EXPECT_EQ(found[0].lines, kMaxLines + 2);
}

TEST(FunctionLength, NoFunctionInActorsOrKernelsRunsOver120Lines) {
  std::map<std::string, std::map<std::string, std::string>> unused = kExceptions;
  int files = 0;
  for (const char* root : {"actors", "kernels"}) {
    ASSERT_TRUE(std::filesystem::is_directory(root)) << root << " not in the runfiles";
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      const std::string path = entry.path().generic_string();
      if (entry.path().extension() != ".cc" || path.ends_with("_test.cc")) continue;
      ++files;
      std::ifstream in(entry.path());
      const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (const LongFunction& f : LongFunctions(source)) {
        const auto file = kExceptions.find(path);
        if (file != kExceptions.end() && file->second.contains(f.signature)) {
          unused[path].erase(f.signature);
          continue;
        }
        ADD_FAILURE() << path << ": " << f.lines << " lines (at most " << kMaxLines << "): "
                      << f.signature;
      }
    }
  }
  EXPECT_GT(files, 50);
  for (const auto& [path, signatures] : unused) {
    for (const auto& [signature, why] : signatures) {
      ADD_FAILURE() << path << ": listed as long (" << why << ") but is not: " << signature;
    }
  }
}

}  // namespace
}  // namespace ahbm
