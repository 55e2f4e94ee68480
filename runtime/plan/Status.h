// Error plumbing for the runtime: absl::Status everywhere, no exceptions and
// no asserts on anything a plan, a data file or a user can reach.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define DS_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    ::absl::Status _ds_status = (expr);                                        \
    if (!_ds_status.ok())                                                      \
      return _ds_status;                                                       \
  } while (0)

#define DS_CONCAT_INNER(a, b) a##b
#define DS_CONCAT(a, b) DS_CONCAT_INNER(a, b)
#define DS_ASSIGN_OR_RETURN(lhs, expr)                                         \
  DS_ASSIGN_OR_RETURN_IMPL(DS_CONCAT(_ds_statusor_, __LINE__), lhs, expr)
#define DS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                               \
  auto tmp = (expr);                                                           \
  if (!tmp.ok())                                                               \
    return tmp.status();                                                       \
  lhs = std::move(tmp).value()
