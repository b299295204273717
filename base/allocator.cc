// The allocator settings of the simulator's binaries (jemalloc, //third_party:jemalloc).
// jemalloc reads this symbol once at start-up; MALLOC_CONF in the environment still overrides.
//
// thp:always asks for transparent huge pages on jemalloc's arenas (madvise, so it works where
// the kernel's THP mode is `madvise`): a full-chip decode touches ~55 MB of small objects, and
// with 4 KiB pages it took ~11.7 K page faults and spent ~10% of its samples in the kernel's
// fault path; with huge pages ~2.5 K faults. metadata_thp does the same for jemalloc's own
// metadata.
extern "C" const char* malloc_conf = "thp:always,metadata_thp:always";
