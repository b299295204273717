#include "actors/time.h"

#include "absl/strings/str_cat.h"

namespace ahbm::sim {

std::ostream& operator<<(std::ostream& os, SimTime t) { return os << t.value() << "ps"; }
std::ostream& operator<<(std::ostream& os, Cycles c) { return os << c.value() << "cyc"; }
std::ostream& operator<<(std::ostream& os, Bytes b) { return os << b.value() << "B"; }
std::ostream& operator<<(std::ostream& os, Addr a) {
  return os << "0x" << std::hex << a.value() << std::dec;
}

absl::StatusOr<ClockDomain> ClockDomain::FromPeriod(SimTime period) {
  if (period.value() == 0) {
    return absl::InvalidArgumentError("clock period must be > 0 ps (got 0)");
  }
  return ClockDomain(period);
}

absl::StatusOr<ClockDomain> ClockDomain::FromMHz(uint64_t mhz) {
  constexpr uint64_t kPsPerMicrosecond = 1'000'000;
  if (mhz == 0 || kPsPerMicrosecond % mhz != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "clock frequency must divide 1000000 MHz so the period is whole picoseconds (got ", mhz,
        " MHz)"));
  }
  return ClockDomain(SimTime(kPsPerMicrosecond / mhz));
}

}  // namespace ahbm::sim
