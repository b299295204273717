#include "cluster/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/status_macros.h"

namespace ahbm::cluster {

namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

std::string OpenSslReason() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "not PEM";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;

// The first PEM certificate in `path`; InvalidArgument naming `flag` otherwise.
absl::StatusOr<Certificate> ReadCertificate(const char* flag, const std::string& path) {
  File file(std::fopen(path.c_str(), "r"));
  if (!file) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  Certificate cert(PEM_read_X509(file.get(), nullptr, nullptr, nullptr), X509_free);
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " is not a PEM certificate (", OpenSslReason(), ")"));
  }
  return cert;
}

}  // namespace

absl::Status CheckTls(const TlsFiles& files) {
  if (!files.enabled()) return absl::OkStatus();
  for (const auto& [flag, path] : {std::pair{"tls_cert", &files.cert},
                                   std::pair{"tls_key", &files.key},
                                   std::pair{"tls_ca", &files.ca}}) {
    if (path->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": missing (TLS needs --tls_cert, --tls_key and --tls_ca)"));
    }
  }
  absl::StatusOr<Certificate> cert = ReadCertificate("tls_cert", files.cert);
  RETURN_IF_ERROR(cert.status());
  File key_file(std::fopen(files.key.c_str(), "r"));
  if (!key_file) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_key: cannot read ", files.key));
  }
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_PrivateKey(key_file.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (!key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key: ", files.key, " is not a PEM private key without a passphrase (",
        OpenSslReason(), ")"));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key: ", files.key, " does not match the certificate in ", files.cert));
  }
  RETURN_IF_ERROR(ReadCertificate("tls_ca", files.ca).status());
  return absl::OkStatus();
}

void ApplyTls(const TlsFiles& files, caf::actor_system_config& cfg) {
  cfg.openssl_certificate = files.cert;
  cfg.openssl_key = files.key;
  cfg.openssl_cafile = files.ca;
}

}  // namespace ahbm::cluster
