// Reads of a memory-mapped file that shrank after it was mapped (another process truncated or
// rewrote it) fault with SIGBUS, which would end the process. guarded_mapped_read runs a read
// with this thread's SIGBUS turned into a `false` return and the faulting address, so the loader
// can name the tensor, file and byte offset instead of crashing.
//
// The process gets one SIGBUS handler, installed on first use, that jumps back into the guarded
// call when the fault happened inside one on the same thread and otherwise hands the signal to
// the handler that was there before (or the default action). A fault leaves `read` by a long
// jump: its frames are not unwound, so it must own nothing that needs a destructor (scans and
// memcpy of plain memory).
#pragma once

#include <functional>
#include <string>

namespace gossamer {

// Runs read(); false when it faulted with SIGBUS, the faulting address then in *fault_addr.
bool guarded_mapped_read(const std::function<void()>& read, const void** fault_addr);

// What the callers' errors say after `what` when a guarded read faulted: "<what> faulted
// (SIGBUS): the file is shorter than when it was opened (truncated or rewritten while loading?)".
std::string mapped_read_fault(const std::string& what);

}  // namespace gossamer
