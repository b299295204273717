#include "sweep/store.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "actors/observe/op_log.h"
#include "base/status_macros.h"
#include "base/text_proto.h"
#include "google/protobuf/io/gzip_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace ahbm::sweep {

namespace {

namespace fs = std::filesystem;

constexpr char kManifest[] = "manifest.textproto";

std::string ResultName(uint64_t index) { return absl::StrCat(index, ".result"); }

// Writes `bytes` to `path` through a temporary name in the same folder and a rename.
absl::Status WriteWhole(const fs::path& path, const std::string& bytes) {
  const fs::path temp = path.string() + ".partial";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << bytes;
    out.close();
    if (!out) {
      return absl::InvalidArgumentError(absl::StrCat("--out_dir: cannot write ", temp.string()));
    }
  }
  std::error_code error;
  fs::rename(temp, path, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out_dir: cannot write ", path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<pb::StoredResult> ReadStored(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  pb::StoredResult stored;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::GzipInputStream unzipped(&raw, google::protobuf::io::GzipInputStream::GZIP);
  if (bytes.size() > (1u << 30) || !stored.ParseFromZeroCopyStream(&unzipped)) {
    return absl::DataLossError(absl::StrCat(path.string(), ": not a stored job result"));
  }
  return stored;
}

// Creates <dir>/jobs; with `clear`, removes the results (and partial writes) of an earlier run.
absl::Status PrepareFolder(const fs::path& folder, bool clear) {
  std::error_code error;
  fs::create_directories(folder, error);
  if (error || !fs::is_directory(folder)) {
    return absl::InvalidArgumentError(absl::StrCat("--out_dir: cannot create ", folder.string(),
                                                   error ? ": " + error.message() : ""));
  }
  if (!clear) return absl::OkStatus();
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".result") || name.ends_with(".partial")) fs::remove(entry.path(), error);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Shard> ParseShard(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '/');
  Shard shard;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &shard.index) ||
      !absl::SimpleAtoi(parts[1], &shard.count) || shard.count == 0 ||
      shard.index >= shard.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard: must be i/n with 0 <= i < n (got '", text, "')"));
  }
  return shard;
}

std::string StoreFolder(const std::string& dir) { return (fs::path(dir) / "jobs").string(); }

absl::StatusOr<pb::StoreManifest> ReadManifest(const std::string& dir) {
  const std::string path = (fs::path(StoreFolder(dir)) / kManifest).string();
  absl::StatusOr<std::string> text = ReadTextFile(path, "job store manifest");
  RETURN_IF_ERROR(text.status());
  pb::StoreManifest manifest;
  RETURN_IF_ERROR(ParseTextProto(*text, path, &manifest));
  return manifest;
}

absl::StatusOr<std::vector<pb::StoredResult>> ReadResults(const std::string& dir) {
  std::vector<pb::StoredResult> out;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(StoreFolder(dir), error)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".result")) continue;
    absl::StatusOr<pb::StoredResult> stored = ReadStored(entry.path());
    RETURN_IF_ERROR(stored.status());
    if (name != ResultName(stored->index())) {
      return absl::DataLossError(
          absl::StrCat(entry.path().string(), ": holds job ", stored->index()));
    }
    out.push_back(*std::move(stored));
  }
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", StoreFolder(dir), ": ", error.message()));
  }
  return out;
}

absl::Status WriteStored(const std::string& dir, const pb::StoredResult& stored) {
  // gzip: a full-chip report is ~480 KiB of mostly repeated unit names, ~37 KiB compressed.
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::GzipOutputStream zipped(&raw);
    if (!stored.SerializeToZeroCopyStream(&zipped) || !zipped.Close()) {
      return absl::InternalError(absl::StrCat("job ", stored.index(), ": cannot compress"));
    }
  }
  return WriteWhole(fs::path(StoreFolder(dir)) / ResultName(stored.index()), bytes);
}

absl::StatusOr<pb::StoreManifest> MergeStores(const std::vector<std::string>& dirs,
                                              const std::string& out_dir) {
  if (dirs.empty()) {
    return absl::InvalidArgumentError("give the shards' folders (ahbm merge DIR... "
                                      "--out_dir=D)");
  }
  std::vector<pb::StoreManifest> manifests;
  for (const std::string& dir : dirs) {
    absl::StatusOr<pb::StoreManifest> manifest = ReadManifest(dir);
    RETURN_IF_ERROR(manifest.status());
    manifests.push_back(*std::move(manifest));
  }
  for (const std::string& dir : dirs) {
    std::error_code same_error;
    if (fs::exists(out_dir) && fs::equivalent(dir, out_dir, same_error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out_dir: ", out_dir, " is one of the folders merged; give another"));
    }
  }
  const pb::StoreManifest& first = manifests[0];
  std::vector<int> shard_seen(first.shard_count(), -1);
  for (size_t d = 0; d < dirs.size(); ++d) {
    const pb::StoreManifest& m = manifests[d];
    const auto differs = [&](const char* field, const std::string& a, const std::string& b) {
      return absl::InvalidArgumentError(absl::StrCat(dirs[d], " differs from ",
                                                     dirs[0], " in ", field, " (", a, " vs ", b,
                                                     "): not shards of one run"));
    };
    if (m.command() != first.command()) return differs("command", m.command(), first.command());
    if (std::vector<std::string>(m.args().begin(), m.args().end()) !=
        std::vector<std::string>(first.args().begin(), first.args().end())) {
      return differs("flags", absl::StrJoin(m.args(), " "), absl::StrJoin(first.args(), " "));
    }
    if (m.jobs() != first.jobs() || m.job_list_digest() != first.job_list_digest()) {
      return differs("job list", m.job_list_digest(), first.job_list_digest());
    }
    if (m.shard_count() != first.shard_count()) {
      return differs("shard count", absl::StrCat(m.shard_count()),
                     absl::StrCat(first.shard_count()));
    }
    if (m.build_digest() != first.build_digest()) {
      return differs("build", m.build_digest(), first.build_digest());
    }
    if (m.schema_digest() != first.schema_digest()) {
      return differs("schema", m.schema_digest(), first.schema_digest());
    }
    if (m.shard_count() > 0) {
      if (shard_seen[m.shard_index()] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shard ", m.shard_index(), "/", m.shard_count(), " given twice (",
            dirs[shard_seen[m.shard_index()]], " and ", dirs[d], ")"));
      }
      shard_seen[m.shard_index()] = static_cast<int>(d);
    }
  }
  for (uint32_t i = 0; i < first.shard_count(); ++i) {
    if (shard_seen[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", i, "/", first.shard_count(), " missing"));
    }
  }
  const fs::path folder = StoreFolder(out_dir);
  RETURN_IF_ERROR(PrepareFolder(folder, /*clear=*/true));
  std::map<uint64_t, std::string> digest_of;
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::vector<pb::StoredResult>> results = ReadResults(dir);
    RETURN_IF_ERROR(results.status());
    for (const pb::StoredResult& stored : *results) {
      const auto [it, fresh] = digest_of.emplace(stored.index(), stored.spec_digest());
      if (!fresh && it->second != stored.spec_digest()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job ", stored.index(), " has two different jobs' results (", dir, ")"));
      }
      RETURN_IF_ERROR(WriteStored(out_dir, stored));
    }
  }
  pb::StoreManifest merged = first;
  merged.set_shard_index(0);
  merged.set_shard_count(0);
  std::string text;
  google::protobuf::TextFormat::PrintToString(merged, &text);
  RETURN_IF_ERROR(WriteWhole(folder / kManifest, text));
  return first;
}

absl::StatusOr<std::unique_ptr<StoreRunner>> StoreRunner::Create(Runner* inner,
                                                                 StoreOptions options,
                                                                 pb::StoreManifest manifest) {
  RETURN_IF_ERROR(
      PrepareFolder(StoreFolder(options.dir), /*clear=*/!options.resume && !options.merge));
  manifest.set_shard_index(options.shard.index);
  manifest.set_shard_count(options.shard.count);
  return std::unique_ptr<StoreRunner>(
      new StoreRunner(inner, std::move(options), std::move(manifest)));
}

std::vector<pb::JobResult> StoreRunner::RunNamed(const std::vector<Job>& jobs,
                                                 const std::vector<size_t>& names,
                                                 const Done& on_done) {
  std::vector<pb::JobResult> results(jobs.size());
  std::vector<std::string> digests(jobs.size());
  std::vector<Job> to_run;
  std::vector<size_t> to_run_names, to_run_at;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const uint64_t index = offset_ + names[i];
    absl::StatusOr<pb::JobSpec> spec = ToSpec(jobs[i]);
    digests[i] = spec.ok() ? SpecDigest(*spec) : "";  // "": a local-only job, never stored
    absl::StrAppend(&list_digests_, digests[i]);
    if (options_.resume || options_.merge) {
      absl::StatusOr<pb::StoredResult> stored =
          ReadStored(fs::path(StoreFolder(options_.dir)) / ResultName(index));
      if (stored.ok() && stored->index() == index && stored->spec_digest() == digests[i]) {
        results[i] = stored->result();
        ++taken_;
        if (on_done) on_done(names[i], results[i]);
        continue;
      }
    }
    if (options_.merge) {
      results[i] = FailedResult(absl::AbortedError(
          absl::StrCat("job ", index, ": no result in the merged folders")));
      missing_.push_back(index);
      continue;
    }
    if (options_.shard.count > 0 && index % options_.shard.count != options_.shard.index) {
      results[i] = FailedResult(absl::AbortedError(absl::StrCat(
          "job ", index, ": in shard ", index % options_.shard.count, "/", options_.shard.count)));
      continue;
    }
    to_run.push_back(jobs[i]);
    to_run_names.push_back(index);
    to_run_at.push_back(i);
  }
  manifest_.set_jobs(offset_ + jobs.size());
  manifest_.set_job_list_digest(observe::BytesDigest(list_digests_));
  if (!options_.merge) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(manifest_, &text);
    if (absl::Status s = WriteWhole(fs::path(StoreFolder(options_.dir)) / kManifest, text);
        !s.ok() && write_status_.ok()) {
      write_status_ = s;
    }
  }
  if (!to_run.empty()) {
    std::map<size_t, size_t> at;  // name -> position in `jobs`
    for (size_t k = 0; k < to_run.size(); ++k) at[to_run_names[k]] = to_run_at[k];
    const std::vector<pb::JobResult> ran = inner_->RunNamed(
        to_run, to_run_names, [&](size_t name, const pb::JobResult& result) {
          const size_t i = at.at(name);
          if (result.status_code() != static_cast<int32_t>(absl::StatusCode::kAborted) &&
              !digests[i].empty()) {
            pb::StoredResult stored;
            stored.set_index(name);
            stored.set_spec_digest(digests[i]);
            *stored.mutable_result() = result;
            if (absl::Status s = WriteStored(options_.dir, stored); !s.ok() && write_status_.ok()) {
              write_status_ = s;
            }
          }
          if (on_done) on_done(name - offset_, result);
        });
    for (size_t k = 0; k < to_run.size(); ++k) results[to_run_at[k]] = ran[k];
    ran_ += to_run.size();
  }
  offset_ += jobs.size();
  return results;
}

}  // namespace ahbm::sweep
