// Exit statuses of the keywatch command. Constants only: thread-safe.
#pragma once

namespace keywatch::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;   // could not do the job: Redis unreachable, demo timed out
constexpr int kExitBadInput = 2;  // bad option or value: nothing was started

}  // namespace keywatch::cli
