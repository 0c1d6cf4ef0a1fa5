// Names of request states and finish reasons (logs, plan dumps, tests).
#include "sched/request.h"

namespace deepinfer::sched {

const char* request_state_name(RequestState state) {
  switch (state) {
    case RequestState::kWaiting: return "waiting";
    case RequestState::kPrefill: return "prefill";
    case RequestState::kDecode: return "decode";
    case RequestState::kPreempted: return "preempted";
    case RequestState::kFinished: return "finished";
    case RequestState::kAborted: return "aborted";
  }
  return "?";
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAborted: return "aborted";
  }
  return "?";
}

}  // namespace deepinfer::sched
