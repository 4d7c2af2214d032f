@_spi(CourierInternals) import CourierCore

/// Waits for an unstructured task's value without being tied to it: the wait ends when the
/// task ends, when the waiting task is cancelled, or when `timeout` passes, whichever comes
/// first, even if the task never returns (awaiting `Task.value` directly ignores the waiter's
/// cancellation, and a task group would wait for a child that ignores its own).
enum DetachedWait {
    /// The value of `task`; `CancellationError` when the caller is cancelled first, or
    /// `timedOut()` when `timeout` passes first. The task itself is left running.
    static func value<Value: Sendable>(
        of task: Task<Value, any Error>, timeout: Duration? = nil,
        timedOut: @escaping @Sendable () -> any Error = { CancellationError() }
    ) async throws -> Value {
        let outcome = Outcome<Value>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard outcome.install(continuation) else { return }
                Task { outcome.resume(with: await task.result) }
                var timer: Task<Void, Never>?
                if let timeout {
                    timer = Task {
                        try? await Task.sleep(for: timeout)
                        if !Task.isCancelled { outcome.resume(with: .failure(timedOut())) }
                    }
                }
                if let timer { outcome.onResume { timer.cancel() } }
            }
        } onCancel: {
            outcome.resume(with: .failure(CancellationError()))
        }
    }

    /// One continuation, resumed once by whichever of the task, the timer and the caller's
    /// cancellation comes first.
    private final class Outcome<Value: Sendable>: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Value, any Error>?
            var early: Result<Value, any Error>?
            var done = false
            var cleanup: (@Sendable () -> Void)?
        }

        private let state = Locked(State())

        /// Keeps `continuation`; false when the outcome came first (it is resumed now).
        func install(_ continuation: CheckedContinuation<Value, any Error>) -> Bool {
            let early = state.withLock { state -> Result<Value, any Error>? in
                guard !state.done else { return state.early }
                state.continuation = continuation
                return nil
            }
            if let early {
                continuation.resume(with: early)
                return false
            }
            return true
        }

        /// What to do once resumed (cancel the timer); at once if that already happened.
        func onResume(_ cleanup: @escaping @Sendable () -> Void) {
            let now = state.withLock { state -> Bool in
                if state.done { return true }
                state.cleanup = cleanup
                return false
            }
            if now { cleanup() }
        }

        func resume(with result: Result<Value, any Error>) {
            let (continuation, cleanup) = state.withLock {
                state -> (CheckedContinuation<Value, any Error>?, (@Sendable () -> Void)?) in
                guard !state.done else { return (nil, nil) }
                state.done = true
                state.early = result
                defer { (state.continuation, state.cleanup) = (nil, nil) }
                return (state.continuation, state.cleanup)
            }
            continuation?.resume(with: result)
            cleanup?()
        }
    }
}
