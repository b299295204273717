#include "actors/observe/message_trace.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/util/delimited_message_util.h"

namespace ahbm::observe {

void MessageTraceWriter::OnSend(const sim::Stamp& stamp, sim::UnitId dst,
                                const google::protobuf::Message* message, const std::string& name) {
  pb::Envelope e;
  e.set_time_ps(stamp.time.value());
  e.set_src_unit(stamp.src);
  e.set_src_seq(stamp.seq);
  e.set_dst_unit(dst);
  if (message == nullptr) e.set_type(name);
  if (message != nullptr) {
    const google::protobuf::Descriptor* type = message->GetDescriptor();
    e.set_type(type->full_name());
    // The oneof field of this message's type.
    const google::protobuf::OneofDescriptor* body = e.GetDescriptor()->FindOneofByName("body");
    for (int i = 0; i < body->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* field = body->field(i);
      if (field->message_type() == type) {
        e.GetReflection()->MutableMessage(&e, field)->CopyFrom(*message);
        break;
      }
    }
  }
  e.SerializeToString(&pending_[stamp.key()]);
}

void MessageTraceWriter::OnDeliver(unsigned __int128 key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;  // sent before the tracer was set
  if (status_.ok()) {
    uint8_t size[5];  // a varint32
    const uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
        static_cast<uint32_t>(it->second.size()), size);
    out_->write(reinterpret_cast<const char*>(size), end - size);
    out_->write(it->second.data(), static_cast<std::streamsize>(it->second.size()));
    if (!*out_) status_ = absl::DataLossError("message trace: write failed");
  }
  pending_.erase(it);
  ++written_;
}

absl::StatusOr<std::vector<pb::Envelope>> ReadMessageTrace(std::istream& in) {
  std::vector<pb::Envelope> out;
  google::protobuf::io::IstreamInputStream raw(&in);
  while (true) {
    pb::Envelope e;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&e, &raw, &clean_eof)) {
      if (clean_eof) return out;
      return absl::DataLossError(
          absl::StrCat("message trace: envelope ", out.size(), " is cut short or malformed"));
    }
    out.push_back(std::move(e));
  }
}

}  // namespace ahbm::observe
