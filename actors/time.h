// Strong types for simulated time and space (STYLE 1, DESIGN §3).
//
// Contract:
// - SimTime (picoseconds), Cycles, Bytes and Addr wrap a uint64_t. Construction from an integer
//   is explicit, there is no conversion back except `.value()`, and only the arithmetic that
//   has a meaning is defined (no SimTime * SimTime, no Cycles + SimTime, no Addr + Addr).
// - Subtraction that would go below zero is a bug and fails an AHBM_CHECK.
// - ClockDomain is the only place cycles become time: a cycle is one `period()`, edges sit at
//   multiples of the period from time 0.
#ifndef AHBMSIM_ACTORS_TIME_H_
#define AHBMSIM_ACTORS_TIME_H_

#include <compare>
#include <cstdint>
#include <limits>
#include <ostream>

#include "absl/status/statusor.h"
#include "base/check.h"

namespace ahbm::sim {

// The arithmetic SimTime, Cycles and Bytes share: a uint64_t with explicit construction,
// `.value()`, addition and subtraction of the same type (below zero is a bug), scaling by an
// integer and ordering. Different quantities never mix: each derives its own Quantity<Self>.
template <typename Self>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(uint64_t n) : n_(n) {}
  constexpr uint64_t value() const { return n_; }
  constexpr Self& operator+=(Self other) {
    n_ += other.n_;
    return self();
  }
  constexpr Self& operator-=(Self other) {
    if (n_ < other.n_) [[unlikely]] Underflow(n_, other.n_);
    n_ -= other.n_;
    return self();
  }
  friend constexpr Self operator+(Self a, Self b) { return a += b; }
  friend constexpr Self operator-(Self a, Self b) { return a -= b; }
  friend constexpr Self operator*(Self a, uint64_t k) { return Self(a.n_ * k); }
  friend constexpr Self operator*(uint64_t k, Self a) { return a * k; }
  friend constexpr auto operator<=>(const Quantity&, const Quantity&) = default;

 private:
  // The failure path out of line, so that the subtraction itself inlines.
  [[noreturn, gnu::cold, gnu::noinline]] static void Underflow(uint64_t a, uint64_t b) {
    AHBM_CHECK(a >= b) << Self(a) << " - " << Self(b);
    __builtin_unreachable();
  }
  constexpr Self& self() { return static_cast<Self&>(*this); }
  uint64_t n_ = 0;
};

// A point in or a span of simulated time, in picoseconds.
class SimTime : public Quantity<SimTime> {
 public:
  using Quantity::Quantity;
  static constexpr SimTime Max() { return SimTime(std::numeric_limits<uint64_t>::max()); }
};

// A number of clock cycles of some ClockDomain.
class Cycles : public Quantity<Cycles> {
 public:
  using Quantity::Quantity;
};

// An amount of data in bytes.
class Bytes : public Quantity<Bytes> {
 public:
  using Quantity::Quantity;
};

// Printing for test failures and diagnostics: "1500ps", "7cyc", "256B".
std::ostream& operator<<(std::ostream& os, SimTime t);
std::ostream& operator<<(std::ostream& os, Cycles c);
std::ostream& operator<<(std::ostream& os, Bytes b);

// A byte address in some memory space. Offsets are Bytes; the distance of two addresses is Bytes.
class Addr {
 public:
  constexpr Addr() = default;
  constexpr explicit Addr(uint64_t a) : a_(a) {}

  constexpr uint64_t value() const { return a_; }

  constexpr Addr& operator+=(Bytes off) {
    a_ += off.value();
    return *this;
  }
  constexpr Addr& operator-=(Bytes off) {
    AHBM_CHECK(a_ >= off.value()) << a_ << " - " << off.value() << "B";
    a_ -= off.value();
    return *this;
  }
  friend constexpr Addr operator+(Addr a, Bytes off) { return a += off; }
  friend constexpr Addr operator-(Addr a, Bytes off) { return a -= off; }
  friend constexpr Bytes operator-(Addr a, Addr b) {
    AHBM_CHECK(a.a_ >= b.a_) << a.a_ << " - " << b.a_;
    return Bytes(a.a_ - b.a_);
  }
  friend constexpr auto operator<=>(Addr, Addr) = default;

 private:
  uint64_t a_ = 0;
};

// Printing for test failures and diagnostics: "1500ps", "7cyc", "256B", "0x1000".
std::ostream& operator<<(std::ostream& os, Addr a);

// A clock of fixed period; cycle edges at 0, period, 2*period, ...
class ClockDomain {
 public:
  // Fails with InvalidArgument for a zero period.
  [[nodiscard]] static absl::StatusOr<ClockDomain> FromPeriod(SimTime period);
  // Fails with InvalidArgument unless mhz > 0 and 1'000'000 % mhz == 0 (the period is then an
  // exact number of picoseconds: 1000 MHz -> 1000 ps).
  [[nodiscard]] static absl::StatusOr<ClockDomain> FromMHz(uint64_t mhz);

  constexpr SimTime period() const { return period_; }

  // `c` cycles as time: c * period.
  constexpr SimTime ToTime(Cycles c) const { return SimTime(c.value() * period_.value()); }
  // The fewest whole cycles that last at least `t`.
  constexpr Cycles ToCyclesCeil(SimTime t) const {
    return Cycles((t.value() + period_.value() - 1) / period_.value());
  }
  // The first edge at or after `t` (an edge at exactly `t` counts).
  constexpr SimTime NextEdge(SimTime t) const { return ToTime(ToCyclesCeil(t)); }

 private:
  constexpr explicit ClockDomain(SimTime period) : period_(period) {}

  SimTime period_;
};

}  // namespace ahbm::sim

#endif  // AHBMSIM_ACTORS_TIME_H_
