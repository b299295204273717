// The hand-computed timeline (ADR-0060 rev2 §11; DESIGN §4 "Every variant must be checkable
// against a hand-computed timeline"): a 4-tile decode sweep (or one-shot: one tile) on one PE (G = 8, T_q = 1, d = 128,
// TILE = 256, S = 1024, C = P = 1, profile `zero`) on the default topology. Every command's
// start and end below is derived on paper from DESIGN §2 and §4; the derivation is in the
// comments. Times are in PE cycles (1 cycle = 1 ns at 1 GHz).
//
// The numbers used (asserted against the topology first, so a changed topology fails here):
//   HBM channel: 32 B/cycle, first byte after 100 cycles, 256 B interleave; 8 channels per PE.
//     A request granted at t holds the bus for bytes/32 cycles; done = t + 100 + bytes/32.
//     Requests on one channel are served FIFO (grant = max(arrival, bus free)).
//   GEMM: 8x128 array: a (m<=8, k, n<=128) tile takes k cycles; +16 fill/drain after idle.
//   MATH: 8 cycles start-up + elements/128 (exp, div: /32) [+7 for a reduction].
//   Scheduler tiles 32/64/128; composites admitted 4 at a time.
//
// Operand pieces. K tile j is [d=128][TILE=256] bf16 (tile-major, 64 KiB); the Q·Kᵀ composite
// reads it as b[k = d][n = TILE] in pieces (ki, ni) of 64 x 128: 64 rows of 256 B at a row
// stride of 512 B, so piece ni = 0 lies on the even channels, ni = 1 on the odd ones: 16 KiB
// over 4 channels = 4 KiB (128 bus cycles) per channel. Pieces are sent in plan order (k0,n0),
// (k1,n0), (k0,n1), (k1,n1): with channels free at T, (k0,*) are done at T + 228, (k1,*) at
// T + 356, and the channels are busy until T + 256. V tile j is [256][128] bf16 (64 KiB
// contiguous): four dense 16 KiB pieces (ki = 0..3) over all 8 channels, 64 bus cycles each:
// piece i done at T + 164 + 64 i; the channels are busy until T + 256.
//
// Q·Kᵀ GEMM tiles are (8, 64, 128): 64 cycles each, in plan order (k0,n0), (k1,n0), (k0,n1),
// (k1,n1) — oldest ready first, so (k0,n1) runs while (k1,n0) waits for its piece. The SCALE
// epilogue of each output tile [8,128] costs 8 + 1024/128 = 16. P·V tiles are (8, 64, 128):
// 64 cycles each, chained over ki.
//
// Softmax ops of opt1/opt3 (each blocking, on the idle MATH engine), on Sj [8,256] (2048 el):
//   REDUCE_MAX 8+16+7 = 31, MAXIMUM [8,1] 9, SUB 24, EXP 8+64 = 72, SUB [8,1] 9, EXP [8,1] 9,
//   MUL l 9, REDUCE_SUM 31, ADD l 9, MUL O [8,128] 16: 219 cycles in all; then the P·V
//   composite, then ADD O [8,128] 16 (auto-waits on P·V). softmax_pv's fused merge (opt2):
//   SCALE 24 + REDUCE_MAX 31 + MAXIMUM 9 + SUB 24 + EXP 72 + REDUCE_SUM 31 + SUB 9 + EXP 9 +
//   MUL 9 + ADD 9 + MUL O 16 = 243.
//
// Prologue (all variants): cmd 1 loads Q [8,128] bf16 = 2 KiB = one 256 B chunk per channel:
// 0..108. Fills m 0..9, l 9..18, O [8,128] 18..34 (cmds 2-4). Epilogue: DIV O/l [8,128]
// 8 + 1024/32 = 40, then the blocking store of 2 KiB: +108.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/chip_sim.h"
#include "gtest/gtest.h"
#include "kernels/attention/decode_launch.h"
#include "kernels/attention/decode_test_util.h"
#include "kernels/runtime/runtime.h"
#include "topology/loader.h"

namespace ahbm::kernels {
namespace {

using Span = std::pair<uint64_t, uint64_t>;  // start, end (cycles)
using Table = std::map<uint64_t, Span>;      // by cmd id

constexpr uint64_t kSoftmax[] = {31, 9, 24, 72, 9, 9, 9, 31, 9, 16};  // the 10 ops, in order

// Appends the 10 softmax ops starting at `t` (cmd ids from `id`); returns their end.
uint64_t Softmax(Table& t, uint64_t& id, uint64_t at) {
  for (uint64_t c : kSoftmax) {
    t[id++] = {at, at + c};
    at += c;
  }
  return at;
}

// opt1: every tile is QK (issued at T, channels and engines idle) -> softmax -> PV -> ADD.
//   QK: pieces (k0,*) T+228, (k1,*) T+356. GEMM (k0,n0) T+228..T+308 (fill), (k0,n1)
//   T+308..T+372, (k1,n0) T+372..T+436, (k1,n1) T+436..T+500; Epi(n0) T+436..T+452, Epi(n1)
//   T+500..T+516: QK = [T, T+516].
//   Softmax T+516..T+735. PV issued at T' = T+735: pieces done T'+164+64i; GEMM G0
//   T'+164..T'+244 (fill), then back to back: end T'+436. ADD T'+436..T'+452; next T = that.
Table Opt1() {
  Table t;
  t[1] = {0, 108};
  t[2] = {0, 9};
  t[3] = {9, 18};
  t[4] = {18, 34};
  uint64_t id = 5, at = 34;
  for (int j = 0; j < 4; ++j) {
    t[id++] = {at, at + 516};                    // Q·Kᵀ(j)
    const uint64_t pv = Softmax(t, id, at + 516);  // softmax(j)
    t[id++] = {pv, pv + 436};                    // P·V(j)
    t[id++] = {pv + 436, pv + 452};              // O += P·V
    at = pv + 452;
  }
  t[id++] = {at, at + 40};   // O / l
  t[id++] = {at + 40, at + 148};  // store
  return t;
}

// opt3: Q·Kᵀ(j+1) is issued before softmax(j).
//   j=0: QK0 and QK1 issued at 34. QK0 as opt1: [34, 550], GEMM 262..534, Epi(n0) 470..486,
//   Epi(n1) 534..550. QK1's pieces queue behind QK0's: channels free at 290, so (k0,*) done
//   518, (k1,*) 646; its GEMMs follow QK0's: (k0,n0) 534..598, (k0,n1) 598..662, (k1,n0)
//   662..726, (k1,n1) 726..790; its bus work starts at 290: QK1 = [290, ...].
//   Softmax(0) from 550: ops to REDUCE_SUM end at 744; QK1's Epi(n0), ready since 726 and
//   older, takes the MATH engine 744..760; ADD l 760..769, MUL O 769..785. QK1's Epi(n1)
//   790..806: QK1 = [290, 806].
//   PV0 issued 785 (channels free): pieces 949, 1013, 1077, 1141; GEMM idle since 790:
//   949..1029 (fill), then 1093, 1157, 1221: PV0 = [785, 1221]; ADD O 1221..1237.
//   j=1: QK2 issued 1237: pieces (k0,*) 1465, (k1,*) 1593; GEMM (k0,n0) 1465..1545 (fill),
//   (k0,n1) ..1609, (k1,n0) ..1673, (k1,n1) ..1737; Epi 1673..1689, 1737..1753: QK2 =
//   [1237, 1753]. Softmax(1) on Sj(1) 1237..1456. PV1 issued 1456, but QK2's pieces hold the
//   channels until 1493: pieces 1657, 1721, 1785, 1849; its GEMMs wait behind the older QK2
//   ("hidden, not removed"): 1737..1801, ..1865, ..1929, ..1993: PV1 = [1493, 1993]; ADD O
//   1993..2009.
//   j=2: the same with T = 2009: QK3 = [2009, 2525] (GEMM 2237..2509), softmax(2) 2009..2228,
//   PV2 bus from 2265: pieces 2429.., GEMMs after QK3's: 2509..2765: PV2 = [2265, 2765];
//   ADD O 2765..2781.
//   j=3: no next Q·Kᵀ; softmax(3) 2781..3000; PV3 issued 3000, idle channels and engine:
//   pieces 3164.., GEMM 3164..3244 (fill) .. 3436: PV3 = [3000, 3436]; ADD 3436..3452.
Table Opt3() {
  Table t;
  t[1] = {0, 108};
  t[2] = {0, 9};
  t[3] = {9, 18};
  t[4] = {18, 34};
  t[5] = {34, 550};   // QK0
  t[6] = {290, 806};  // QK1
  uint64_t id = 7;
  // softmax(0): the first eight ops from 550, then Epi of QK1 delays ADD l and MUL O.
  uint64_t at = 550;
  for (int k = 0; k < 8; ++k) {
    t[id++] = {at, at + kSoftmax[k]};
    at += kSoftmax[k];
  }
  t[id++] = {760, 769};     // ADD l
  t[id++] = {769, 785};     // MUL O
  t[id++] = {785, 1221};    // PV0
  t[id++] = {1221, 1237};   // ADD O
  t[id++] = {1237, 1753};   // QK2
  Softmax(t, id, 1237);     // softmax(1) 1237..1456
  t[id++] = {1493, 1993};   // PV1
  t[id++] = {1993, 2009};   // ADD O
  t[id++] = {2009, 2525};   // QK3
  Softmax(t, id, 2009);     // softmax(2) 2009..2228
  t[id++] = {2265, 2765};   // PV2
  t[id++] = {2765, 2781};   // ADD O
  Softmax(t, id, 2781);     // softmax(3) 2781..3000
  t[id++] = {3000, 3436};   // PV3
  t[id++] = {3436, 3452};   // ADD O
  t[id++] = {3452, 3492};   // O / l
  t[id++] = {3492, 3600};   // store
  return t;
}

// opt2: the CPU issues QK0, SPV0, QK1, SPV1, QK2, SPV2, QK3, SPV3 at 34 and waits for all.
//   Four are admitted at 34 (QK0, SPV0, QK1, SPV1) and send their DMAs in that order; on every
//   channel: QK0 K 34..290, SPV0 V 290..546, QK1 K 546..802, SPV1 V 802..1058. So QK0 pieces
//   262/390, V0 pieces 454..646, QK1 pieces 774/902, V1 pieces 966..1158.
//   GEMM: QK0 262..534 (as opt1; no epilogue: QK0 = [34, 534]). SPV0's merge (243) needs S0:
//   MATH 534..777. At 774 only QK1 (k0,n0) is ready (SPV0's P·V needs the merge): 774..854
//   (fill). Then the older SPV0's four P·V tiles 854..1110: SPV0 = [290, 1110]. Then QK1's
//   other tiles 1110..1302: QK1 = [546, 1302].
//   Admission: QK0 ends 534 -> QK2 admitted, its K after SPV1's V: 1058..1314, pieces
//   1286/1414. SPV0 ends 1110 -> SPV2: V 1314..1570, pieces 1478..1670. QK1 ends 1302 -> QK3:
//   K 1570..1826, pieces 1798/1926. QK2 ends 1558 (below) -> SPV3: V 1826..2082.
//   SPV1's merge needs S1 (1302): 1302..1545. GEMM at 1302: QK2 (k0,*) ready (1286): 1302..
//   1430, (k1,*) 1430..1558: QK2 = [1058, 1558]. SPV1's P·V 1558..1814: SPV1 = [802, 1814].
//   SPV2's merge needs S2 and SPV1 (chain): 1814..2057. GEMM at 1814: QK3's tiles (pieces
//   ready 1798/1926): 1814..1942, 1942..2070: QK3 = [1570, 2070]. SPV2's P·V 2070..2326:
//   SPV2 = [1314, 2326]. SPV3's merge 2326..2569; P·V 2569..2649 (fill) .. 2841:
//   SPV3 = [1826, 2841]. The CPU resumes at 2841: O / l 2841..2881, store 2881..2989.
Table Opt2() {
  Table t;
  t[1] = {0, 108};
  t[2] = {0, 9};
  t[3] = {9, 18};
  t[4] = {18, 34};
  t[5] = {34, 534};     // QK0
  t[6] = {290, 1110};   // SPV0
  t[7] = {546, 1302};   // QK1
  t[8] = {802, 1814};   // SPV1
  t[9] = {1058, 1558};  // QK2
  t[10] = {1314, 2326}; // SPV2
  t[11] = {1570, 2070}; // QK3
  t[12] = {1826, 2841}; // SPV3
  t[13] = {2841, 2881}; // O / l
  t[14] = {2881, 2989}; // store
  return t;
}

// One-shot (ADR §5.2; opt1 and opt3 alike): B = TILE = 1024 keys, one Q·Kᵀ, one softmax, one
// P·V. K is [d=128][1024] bf16 (256 KiB, row stride 2 KiB): piece (ki, ni) is 64 rows of 256 B
// at stride 2 KiB, so every row of it sits on channel ni: 16 KiB = 512 bus cycles on one
// channel, the 8 ni in parallel. Issued at 34 (channels free): (k0,*) done 34 + 100 + 512 =
// 646, (k1,*) 646 + 512 = 1158. GEMM, oldest ready first: the eight (k0,ni) 646..726 (fill),
// then 64 each to 1174; the eight (k1,ni) (ready 1158) 1174..1686, (k1,ni) ending at
// 1238 + 64 ni. SCALE epilogue per output tile [8,128] 16 after its (k1,ni): the last
// 1686..1702: QK = [34, 1702].
// Softmax on Sj [8,1024] (8192 elements): REDUCE_MAX 8+64+7 = 79, MAXIMUM 9, SUB 8+64 = 72,
// EXP 8+256 = 264, SUB 9, EXP 9, MUL l 9, REDUCE_SUM 79, ADD l 9, MUL O 16: 1702..2257.
// P·V issued 2257: V [1024][128] bf16 (256 KiB contiguous) in 16 pieces of 16 KiB over all 8
// channels, 64 bus cycles each: piece i done 2257 + 164 + 64 i; GEMM tile 0 2421..2501 (fill),
// then back to back: tile 15 ends 2501 + 15·64 = 3461: PV = [2257, 3461]. ADD O 3461..3477,
// O / l 3477..3517, store 3517..3625.
Table OneShot() {
  Table t;
  t[1] = {0, 108};
  t[2] = {0, 9};
  t[3] = {9, 18};
  t[4] = {18, 34};
  t[5] = {34, 1702};  // Q·Kᵀ over the whole block
  uint64_t id = 6, at = 1702;
  for (uint64_t c : {79, 9, 72, 264, 9, 9, 9, 79, 9, 16}) {
    t[id++] = {at, at + c};
    at += c;
  }
  t[id++] = {2257, 3461};  // P·V
  t[id++] = {3461, 3477};  // O += P·V
  t[id++] = {3477, 3517};  // O / l
  t[id++] = {3517, 3625};  // store
  return t;
}

// opt3 at lookahead 2 (ADR §9.1): Q·Kᵀ(0), Q·Kᵀ(1) primed and Q·Kᵀ(2) issued before softmax(0),
// all at 34, into three Sj buffers; Q·Kᵀ(j+2) is issued before softmax(j).
//   K on the channels: QK0 34..290 (pieces 262/390), QK1 290..546 (518/646), QK2 546..802
//   (774/902). GEMM: QK0 262..534 (as opt1; Epi 470..486, 534..550: QK0 = [34, 550]), QK1
//   534..790 ((k1,*) from 662), QK2 790..1046 ((k1,*) from 918).
//   softmax(0) from 550 as in opt3: to REDUCE_SUM end 744; QK1's Epi(n0) (ready 726, older)
//   744..760, ADD l 760..769, MUL O 769..785; QK1's Epi(n1) 790..806: QK1 = [290, 806].
//   PV0 issued 785; the channels are QK2's until 802: V pieces 966, 1030, 1094, 1158; its
//   GEMMs follow QK2's (older): 1046..1302: PV0 = [802, 1302]. QK2's Epi 982..998,
//   1046..1062: QK2 = [546, 1062]. ADD O 1302..1318.
//   j=1: QK3 issued 1318 (buffer 0: softmax(0) has read it): pieces 1546/1674; GEMM idle since
//   1302: 1546..1626 (fill), ..1690, (k1,*) 1690..1818; Epi 1754..1770, 1818..1834: QK3 =
//   [1318, 1834]. softmax(1) on Sj(1) 1318..1537. PV1 issued 1537, channels QK3's until 1574:
//   pieces 1738.., its GEMMs after QK3's: 1818..2074: PV1 = [1574, 2074]; ADD O 2074..2090.
//   j=2: nothing left to issue; softmax(2) 2090..2309; PV2 2309 (idle channels and engine):
//   [2309, 2745]; ADD 2745..2761. j=3: softmax(3) 2761..2980, PV3 [2980, 3416], ADD
//   3416..3432, O / l 3432..3472, store 3472..3580 (opt3 at lookahead 1: 3600).
Table Opt3Lookahead2() {
  Table t;
  t[1] = {0, 108};
  t[2] = {0, 9};
  t[3] = {9, 18};
  t[4] = {18, 34};
  t[5] = {34, 550};    // QK0
  t[6] = {290, 806};   // QK1
  t[7] = {546, 1062};  // QK2
  uint64_t id = 8, at = 550;
  for (int k = 0; k < 8; ++k) {  // softmax(0) to REDUCE_SUM
    t[id++] = {at, at + kSoftmax[k]};
    at += kSoftmax[k];
  }
  t[id++] = {760, 769};    // ADD l, after QK1's Epi(n0)
  t[id++] = {769, 785};    // MUL O
  t[id++] = {802, 1302};   // PV0
  t[id++] = {1302, 1318};  // ADD O
  t[id++] = {1318, 1834};  // QK3
  Softmax(t, id, 1318);    // softmax(1) 1318..1537
  t[id++] = {1574, 2074};  // PV1
  t[id++] = {2074, 2090};  // ADD O
  Softmax(t, id, 2090);    // softmax(2) 2090..2309
  t[id++] = {2309, 2745};  // PV2
  t[id++] = {2745, 2761};  // ADD O
  Softmax(t, id, 2761);    // softmax(3) 2761..2980
  t[id++] = {2980, 3416};  // PV3
  t[id++] = {3416, 3432};  // ADD O
  t[id++] = {3432, 3472};  // O / l
  t[id++] = {3472, 3580};  // store
  return t;
}

// opt2_lookahead (DESIGN §4b, past the ADR) at lookahead 1: Q·Kᵀ(0) is issued at 0, before
// init_running's fills (they feed only the chain), then QK1, SPV0, QK2, SPV1, QK3, SPV2, SPV3
// at 34. A softmax_pv's span starts at its first op: its V DMA or its merge, the earlier.
//   Admitted at once: QK0 (0), QK1, SPV0, QK2 (34). On every channel: Q's chunk 0..8, QK0 K
//   8..264 (pieces 236/364), QK1 K 264..520 (492/620), SPV0 V 520..776 (684, 748, 812, 876),
//   QK2 K 776..1032 (1004/1132). K(j+1) before V(j): the K-before-V priority of §4 across tiles.
//   GEMM: QK0 236..316 (fill), ..380, (k1,*) 380..508: QK0 = [8, 508]. QK1 (ready 492)
//   508..636, (k1,*) 636..764: QK1 = [264, 764]. SPV0's merge needs S0: MATH 508..751 — under
//   QK1's GEMMs (opt2 leaves the engine idle here); its P·V 764..1020: SPV0 = [508, 1020].
//   QK2 (ready 1004) 1020..1148, (k1,*) 1148..1276: QK2 = [776, 1276].
//   Admission: QK0 ends 508 -> SPV1: V1 after QK2's K, 1032..1288 (pieces 1196..1388). QK1
//   ends 764 -> QK3: K 1288..1544 (1516/1644). SPV0 ends 1020 -> SPV2: V2 1544..1800 (1708..
//   1900). QK2 ends 1276 -> SPV3: V3 1800..2056 (1964..2156).
//   SPV1's merge (S1 and the chain, SPV0): 1020..1263; P·V after QK2: 1276..1532 (pieces in
//   time): SPV1 = [1020, 1532]. QK3 (ready 1516) 1532..1660, (k1,*) 1660..1788: QK3 =
//   [1288, 1788]. SPV2's merge 1532..1775 (under QK3); P·V 1788..2044: SPV2 = [1532, 2044].
//   SPV3's merge 2044..2287 alone (nothing left for the GEMM: the tail); P·V 2287..2367
//   (fill) .. 2559: SPV3 = [1800, 2559]. O / l 2559..2599, store 2599..2707 (opt2: 2989).
Table Opt2Lookahead() {
  Table t;
  t[1] = {0, 108};
  t[2] = {8, 508};      // QK0
  t[3] = {0, 9};        // fills
  t[4] = {9, 18};
  t[5] = {18, 34};
  t[6] = {264, 764};    // QK1
  t[7] = {508, 1020};   // SPV0
  t[8] = {776, 1276};   // QK2
  t[9] = {1020, 1532};  // SPV1
  t[10] = {1288, 1788}; // QK3
  t[11] = {1532, 2044}; // SPV2
  t[12] = {1800, 2559}; // SPV3
  t[13] = {2559, 2599}; // O / l
  t[14] = {2599, 2707}; // store
  return t;
}

class DecodeTimeline : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<pb::Chip> chip = topology::LoadTopologyFile("topology/chip_4sip_fifo.textproto");
    ASSERT_TRUE(chip.ok()) << chip.status();
    chip_ = *chip;
    // The numbers the derivation uses.
    testing::AssertTimelineNumbers(chip_);
  }

  // Runs the sweep and returns every scheduler command's [start, end] in cycles.
  Table Run(DecodeVariant variant, uint32_t lookahead = 1, bool one_shot = false) {
    DecodeConfig cfg;
    cfg.h_q = 8;
    cfg.h_kv = 1;
    cfg.d = 128;
    cfg.s = 1024;
    cfg.c = 1;
    cfg.p = 1;
    cfg.tile = 256;
    cfg.variant = variant;
    cfg.lookahead = lookahead;
    cfg.one_shot = one_shot;
    if (one_shot) cfg.tile = static_cast<uint32_t>(OneShotTile(cfg));  // B = 1024
    sim::ChipSimOptions options;
    options.cubes = *DecodeCubes(chip_, cfg);
    options.issue_cost_profile = "zero";
    auto sim = std::move(*sim::ChipSim::Create(chip_, options));
    KernelRuntime runtime(sim.get(), nullptr);
    EXPECT_TRUE(LaunchDecode(chip_, cfg, runtime, nullptr, {}).ok());
    EXPECT_TRUE(runtime.Run().ok());
    Table t;
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (r.has_op() && r.op().unit_name().ends_with(".scheduler")) {
        t[r.op().cmd_id()] = {r.op().start_ps() / 1000, r.op().end_ps() / 1000};
      }
    }
    latency_ = sim->latency().value() / 1000;
    issue_.clear();
    gemm_busy_.clear();
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (r.has_issue()) issue_[r.issue().cmd_id()] = r.issue().issue_ps() / 1000;
    }
    for (const pb::TraceRecord& r : sim->op_log().records()) {
      if (r.has_op() && r.op().unit_name().ends_with(".gemm")) {
        gemm_busy_.push_back({r.op().cmd_id(), {r.op().start_ps() / 1000, r.op().end_ps() / 1000}});
      }
    }
    return t;
  }

  pb::Chip chip_;
  uint64_t latency_ = 0;
  std::map<uint64_t, uint64_t> issue_;                       // cmd -> issue time
  std::vector<std::pair<uint64_t, Span>> gemm_busy_;         // per command on the GEMM unit
};

void ExpectTable(const Table& got, const Table& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [id, span] : want) {
    ASSERT_TRUE(got.contains(id)) << "cmd " << id;
    EXPECT_EQ(got.at(id), span) << "cmd " << id;
  }
}

TEST_F(DecodeTimeline, Opt1LeavesTheGemmIdleDuringSoftmax) {
  ExpectTable(Run(DecodeVariant::kOpt1), Opt1());
  EXPECT_EQ(latency_, 4930u);
  // The bubble: between Q·Kᵀ(j)'s end and P·V(j)'s GEMMs the engine has nothing: 219 cycles of
  // softmax plus P·V's first V piece (164) per tile.
}

TEST_F(DecodeTimeline, Opt3RunsTheNextQkUnderSoftmax) {
  const Table t = Run(DecodeVariant::kOpt3);
  ExpectTable(t, Opt3());
  EXPECT_EQ(latency_, 3600u);
  // Q·Kᵀ(1)'s GEMM tiles (cmd 6: 534..790) run under softmax(0) (cmds 7-16: 550..785).
  for (const auto& [cmd, span] : gemm_busy_) {
    if (cmd == 6) {
      EXPECT_LT(span.first, t.at(7).first);
      EXPECT_GT(span.second, t.at(16).first);
    }
  }
}

TEST_F(DecodeTimeline, Opt2LetsTheCpuFinishIssuingBeforeTheChainEnds) {
  const Table t = Run(DecodeVariant::kOpt2);
  ExpectTable(t, Opt2());
  EXPECT_EQ(latency_, 2989u);
  // Every composite and softmax_pv was issued at 34, long before the chain ends at 2841.
  for (uint64_t cmd = 5; cmd <= 12; ++cmd) EXPECT_EQ(issue_.at(cmd), 34u) << cmd;
}

// One-shot (ADR §5.2): the whole block (S = B = 1024 keys) is one tile; opt1 and opt3 then
// issue the same commands, so both must give this table.
TEST_F(DecodeTimeline, OneShotIsOneQkOneSoftmaxOnePv) {
  ExpectTable(Run(DecodeVariant::kOpt1, /*lookahead=*/1, /*one_shot=*/true), OneShot());
  EXPECT_EQ(latency_, 3625u);
  ExpectTable(Run(DecodeVariant::kOpt3, /*lookahead=*/1, /*one_shot=*/true), OneShot());
  EXPECT_EQ(latency_, 3625u);
}

TEST_F(DecodeTimeline, Opt3Lookahead2KeepsTwoQkAhead) {
  const Table t = Run(DecodeVariant::kOpt3, /*lookahead=*/2);
  ExpectTable(t, Opt3Lookahead2());
  EXPECT_EQ(latency_, 3580u);
  // Q·Kᵀ(0..2) were all issued at 34, before softmax(0); Q·Kᵀ(3) once softmax(0)'s P·V is in.
  for (uint64_t cmd : {5u, 6u, 7u}) EXPECT_EQ(issue_.at(cmd), 34u) << cmd;
  EXPECT_EQ(issue_.at(20), 1318u);
}

TEST_F(DecodeTimeline, Opt2LookaheadFillsTheGemmUnderEachMerge) {
  const Table t = Run(DecodeVariant::kOpt2Lookahead, /*lookahead=*/1);
  ExpectTable(t, Opt2Lookahead());
  EXPECT_EQ(latency_, 2707u);  // opt2: 2989
  EXPECT_EQ(issue_.at(2), 0u);  // Q·Kᵀ(0) before init_running's fills
  for (uint64_t cmd = 6; cmd <= 12; ++cmd) EXPECT_EQ(issue_.at(cmd), 34u) << cmd;
  // The GEMM engine is busy without a gap from Q·Kᵀ(0)'s first tile to P·V(2)'s last: only
  // the last tile's merge (2044..2287) leaves it idle.
  uint64_t busy = 0, first = UINT64_MAX, last = 0;
  for (const auto& [cmd, span] : gemm_busy_) {
    if (span.second > 2044) continue;
    busy += span.second - span.first;
    first = std::min(first, span.first);
    last = std::max(last, span.second);
  }
  EXPECT_EQ(first, 236u);
  EXPECT_EQ(last, 2044u);
  EXPECT_EQ(busy, last - first);
}

}  // namespace
}  // namespace ahbm::kernels
