#pragma once

namespace ds::rt {

/// Preemption signals (SIGTERM, SIGINT) without interrupting compute.
///
/// A signal handled on a thread that is inside a oneDNN JIT kernel corrupted
/// the heap about once in twenty preempted runs ("corrupted size vs.
/// prev_size" in the next free). So the signals are blocked in every thread
/// ds starts, and one idle thread exists only to receive them. Threads that
/// libraries start before main() (OpenBLAS's pool) still have them unblocked;
/// they sleep between calls, so the same handler running there is harmless.
///
/// Call `installStopSignals()` first in main(), before any thread is started:
/// the mask is inherited by threads created later. It is idempotent.
void installStopSignals();

/// While armed (training), the first SIGTERM/SIGINT only requests a stop,
/// which the trainer honours after the step in flight; a second one, or any
/// signal while disarmed, ends the process as the default action would.
void armGracefulStop(bool armed);

/// The signal that requested a stop while armed, or 0. Cleared by arming.
int stopRequested();

} // namespace ds::rt
