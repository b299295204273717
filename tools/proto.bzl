"""ahbm_cc_proto: compiles a .proto with Debian's system protoc into a cc_library.

Bazel's native cc_proto_library needs a @com_google_protobuf repository, which cannot be
downloaded here; the system protoc (protobuf-compiler 3.21) and libprotobuf do the same job.
Generated headers are included by their source path: "proto/topology.pb.h".
"""

def ahbm_cc_proto(name, src, deps = [], visibility = None):
    """One cc_library per .proto file.

    Args:
      name: target name; the library is `name`, the generated sources `name + "_gen"`.
      src: the .proto file in this package.
      deps: other ahbm_cc_proto targets whose .proto files `src` imports.
      visibility: passed to the cc_library.
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    prefix = pkg + "/" if pkg else ""
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_srcs" for d in deps],
        outs = [base + ".pb.h", base + ".pb.cc"],
        cmd = "protoc -I. --cpp_out=$(GENDIR) " + prefix + src,
        message = "protoc " + prefix + src,
    )
    native.filegroup(
        name = name + "_srcs",
        srcs = [src] + [d + "_srcs" for d in deps],
        visibility = visibility,
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        deps = deps + ["//third_party:protobuf"],
        visibility = visibility,
        copts = ["-Wno-unused-parameter"],
    )
