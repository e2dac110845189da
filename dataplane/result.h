#pragma once
// Results: a value or an error a user can act on (BESS's CommandFailure).
// Codes are stable strings, shown in API replies. Plain C++ in the bottom
// layer, so vhost/ and control/ report errors the same way.
#include <string>
#include <utility>
#include <variant>

namespace strait {

struct Error {
  std::string code;     // invalid_argument, not_found, already_exists, conflict,
                        // resource_exhausted, device_error, internal,
                        // failed_precondition (the config contradicts the saved state)
  std::string message;  // names the field and the problem
};

inline Error invalid(std::string msg) { return {"invalid_argument", std::move(msg)}; }
inline Error not_found(std::string msg) { return {"not_found", std::move(msg)}; }
inline Error exists(std::string msg) { return {"already_exists", std::move(msg)}; }
inline Error conflict(std::string msg) { return {"conflict", std::move(msg)}; }
inline Error exhausted(std::string msg) { return {"resource_exhausted", std::move(msg)}; }
inline Error device_error(std::string msg) { return {"device_error", std::move(msg)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

struct Ok {};
using Status = Result<Ok>;
inline Status ok() { return Ok{}; }

}  // namespace strait
