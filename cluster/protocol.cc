#include "cluster/protocol.h"

#include <fstream>
#include <iterator>

#include "actors/observe/op_log.h"

namespace ahbm::cluster {

const std::string& BuildDigest() {
  static const std::string digest = [] {
    std::ifstream in("/proc/self/exe", std::ios::binary);
    if (!in) return std::string("unknown");
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return observe::BytesDigest(bytes);
  }();
  return digest;
}

}  // namespace ahbm::cluster
