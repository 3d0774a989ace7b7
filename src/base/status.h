// Status and Result<T>: error values for everything that can fail on bad input.
//
// tarmac never throws across module boundaries for expected failures (a bad file, a bad
// request): functions return Status or Result<T>, whose message names what is wrong and where.
// A Status about one input field also carries that field's name (field(): "max_tokens",
// "messages[2].content") and optionally a short machine-readable reason ("context_length_exceeded"),
// set where the check is made, so callers map errors to their API without reading the message.
// Both are plain values; not thread-safe to mutate concurrently, safe to copy.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace tarmac {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // caller passed something malformed (a flag, a request field)
  kDataLoss,         // a file's contents are malformed or truncated
  kNotFound,
  kOutOfRange,
  kUnimplemented,
  kResourceExhausted,
  kIoError,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The input field the error is about; "" when none (or not an input error).
  const std::string& field() const { return field_; }
  // A short machine-readable reason, e.g. "context_length_exceeded"; "" when none.
  const std::string& reason() const { return reason_; }
  // The same status about `field` (and, if given, with `reason`). Preconditions: !ok().
  Status WithField(std::string field, std::string reason = "") const;
  // "DATA_LOSS: tensor 'x' ..." for logs and CLI errors.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
  std::string reason_;
};

template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}
// InvalidArgument about one input field: InvalidField("top_p", "top_p must be in (0, 1], got {}", v).
template <typename... Args>
Status InvalidField(std::string field, fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...))
      .WithField(std::move(field));
}
template <typename... Args>
Status DataLoss(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kDataLoss, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kNotFound, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Unimplemented(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUnimplemented, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status IoError(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kIoError, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status Internal(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInternal, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status ResourceExhausted(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kResourceExhausted, fmt::format(f, std::forward<Args>(args)...));
}

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // Preconditions: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tarmac

#define TARMAC_CONCAT_INNER_(a, b) a##b
#define TARMAC_CONCAT_(a, b) TARMAC_CONCAT_INNER_(a, b)

#define TARMAC_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::tarmac::Status _st = (expr);            \
    if (!_st.ok()) return _st;                \
  } while (0)

#define TARMAC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

// TARMAC_ASSIGN_OR_RETURN(auto x, MaybeX());
#define TARMAC_ASSIGN_OR_RETURN(lhs, expr) \
  TARMAC_ASSIGN_OR_RETURN_IMPL_(TARMAC_CONCAT_(_res_, __LINE__), lhs, expr)
