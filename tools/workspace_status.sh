#!/usr/bin/env bash
# Bazel's --workspace_status_command (.bazelrc): the git commit `ahbm --version` prints
# (cli/BUILD.bazel, :version_h). Only the stamped genrule reads it, so another commit rebuilds
# that header and relinks `ahbm`, nothing else. Outside a git checkout: "unknown".
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
if [[ $commit != unknown ]] && ! git diff --quiet HEAD 2>/dev/null; then commit="$commit-dirty"; fi
echo "STABLE_AHBM_GIT_COMMIT $commit"
