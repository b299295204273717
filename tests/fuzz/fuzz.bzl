"""ahbm_fuzz_test: one fuzz harness, as a bounded test and as a libFuzzer target (README.md)."""

def ahbm_fuzz_test(name, srcs, deps, runs, size = "small", data = [], inputs = []):
    """A harness (LLVMFuzzerTestOneInput in `srcs`) with its seed corpus corpus/<name>/.

    Normal build: linked with fuzz_driver.cc, it runs the corpus, the files `inputs` (labels,
    e.g. checked-in topologies) and `runs` seeded mutations of them. Under --config=fuzz (clang,
    libFuzzer): linked with libFuzzer; tools/fuzz.sh runs it.
    """
    corpus = native.glob(["corpus/%s/*" % name])
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        deps = deps + [":fuzz_support"] + select({
            "//tools:fuzz": [],
            "//conditions:default": [":fuzz_driver"],
        }),
        linkopts = select({
            "//tools:fuzz": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        data = corpus + data + inputs,
        args = select({
            "//tools:fuzz": ["-runs=%d" % runs, "-seed=1"] +
                            ["$(locations %s)" % i for i in inputs] +
                            ["$(location %s)" % f for f in corpus],
            "//conditions:default": [
                "--runs=%d" % runs,
                "--corpus=tests/fuzz/corpus/%s" % name,
            ] + ["$(locations %s)" % i for i in inputs],
        }),
    )
