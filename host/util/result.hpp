// Errors as values inside the host.
//
// A tiny std::expected stand-in (g++ 12 has none): a Result<T> holds either a
// T or an Error, whose message is written for the user (what failed, which
// file, what to do). Exceptions never carry host errors across layers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "tandem/types.h"

namespace tandem::host {

struct Error {
  std::string message;
  tdm_status status = TDM_INTERNAL;  // the ABI status it maps to
  // A plugin failed where the host's input was valid: a kernel that failed
  // at launch or broke its contract (`tandem` exits 3, not 4 or 1).
  bool plugin_failure = false;
};

inline Error make_error(std::string message, tdm_status status = TDM_INTERNAL) {
  return Error{std::move(message), status};
}
inline Error plugin_failure(std::string message, tdm_status status) {
  return Error{std::move(message), status, true};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : data_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const noexcept { return data_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(data_); }

 private:
  std::variant<T, Error> data_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}

  bool ok() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

}  // namespace tandem::host
