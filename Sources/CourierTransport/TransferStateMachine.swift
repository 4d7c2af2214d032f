/// The lifecycle of one transfer, as a value: no I/O, no locks, exhaustively testable.
///
/// The owner keeps it behind a lock, feeds it events, and performs the returned action after
/// unlocking. Events come from three places that race: the caller (`start`, `cancel`,
/// `suspend`, `resume`, from any thread), the engine thread (`engineWillAdd`, `complete`), and
/// Swift task cancellation (`cancel`). Whichever event takes the lock first decides; the other
/// finds the machine already moved on and gets a no-op action. In particular:
///
/// - cancel before start: the transfer finishes cancelled and never reaches the engine;
/// - cancel while queued: it finishes cancelled at once, and the engine is asked to take it off
///   its queue (a transfer waiting for a place lets go of its body then, not when its turn
///   comes); a start still in the engine's inbox is skipped when the engine sees it;
/// - cancel while running: it finishes cancelled at once, and the engine is asked to remove the
///   easy handle; a completion that was already on its way is discarded;
/// - completion first: a later cancel is a no-op, the caller gets the completed result.
package struct TransferStateMachine: Sendable {
    /// A machine in the `initialized` state.
    package init() {}

    package enum State: Equatable, Sendable {
        /// Made, not yet started.
        case initialized
        /// Started and handed to the engine, which has not added it to the multi handle yet.
        case queued
        /// On the multi handle.
        case running
        /// Suspended before the engine added it; it waits until resumed. `handedToEngine` says
        /// whether a start already went to the engine (which will park it when it sees it).
        case suspendedBeforeRunning(handedToEngine: Bool)
        /// Suspended while on the multi handle (the engine paused it).
        case suspendedWhileRunning
        /// Finished: completed, failed or cancelled. Final.
        case finished(cancelled: Bool)
    }

    package private(set) var state: State = .initialized

    package var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }

    // MARK: Caller events

    package enum StartAction: Equatable {
        /// Hand the transfer to the engine.
        case enqueue
        /// Nothing to do (already started, suspended or finished).
        case none
    }

    package mutating func start() -> StartAction {
        switch state {
        case .initialized:
            state = .queued
            return .enqueue
        case .queued, .running, .suspendedBeforeRunning, .suspendedWhileRunning, .finished:
            return .none
        }
    }

    package enum CancelAction: Equatable {
        /// Deliver `CancellationError` now; the engine has nothing of it.
        case finish
        /// Deliver `CancellationError` now and ask the engine to take the transfer off its
        /// queue: it was handed over and may be waiting for a place.
        case finishAndWithdraw
        /// Deliver `CancellationError` now and ask the engine to remove the easy handle.
        case finishAndRemove
        /// Already finished.
        case none
    }

    package mutating func cancel() -> CancelAction {
        switch state {
        case .initialized, .suspendedBeforeRunning(handedToEngine: false):
            state = .finished(cancelled: true)
            return .finish
        case .queued, .suspendedBeforeRunning(handedToEngine: true):
            // Skipped by the engine if it has not taken it from its inbox yet; withdrawn from
            // the session's queue if it waits there.
            state = .finished(cancelled: true)
            return .finishAndWithdraw
        case .running, .suspendedWhileRunning:
            state = .finished(cancelled: true)
            return .finishAndRemove
        case .finished:
            return .none
        }
    }

    /// Whether the transfer is on the multi handle and should be paused: what the engine
    /// applies when a suspend or resume reaches it, whichever of them was last.
    package var isSuspendedWhileRunning: Bool {
        if case .suspendedWhileRunning = state { return true }
        return false
    }

    package enum SuspendAction: Equatable {
        /// Ask the engine to pause the running transfer.
        case pause
        case none
    }

    package mutating func suspend() -> SuspendAction {
        switch state {
        case .initialized:
            state = .suspendedBeforeRunning(handedToEngine: false)
            return .none
        case .queued:
            state = .suspendedBeforeRunning(handedToEngine: true)
            return .none
        case .running:
            state = .suspendedWhileRunning
            return .pause
        case .suspendedBeforeRunning, .suspendedWhileRunning, .finished:
            return .none
        }
    }

    package enum ResumeAction: Equatable {
        /// Hand the transfer to the engine (it was never added, or the engine parked it).
        case enqueue
        /// Ask the engine to unpause the transfer.
        case unpause
        case none
    }

    package mutating func resume() -> ResumeAction {
        switch state {
        case .initialized:
            // `resume()` on a task that was never started starts it, as URLSession's does.
            state = .queued
            return .enqueue
        case .suspendedBeforeRunning(let handedToEngine):
            state = .queued
            // If the start is still in the engine's inbox, the engine will add it; no second enqueue.
            return handedToEngine ? .none : .enqueue
        case .suspendedWhileRunning:
            state = .running
            return .unpause
        case .queued, .running, .finished:
            return .none
        }
    }

    // MARK: Engine events

    package enum AddAction: Equatable {
        /// Add the easy handle to the multi handle.
        case add
        /// Suspended meanwhile: do not add; `resume()` will enqueue it again.
        case park
        /// Finished meanwhile (cancelled): drop it.
        case skip
    }

    /// The engine took the transfer from its inbox.
    package mutating func engineWillAdd() -> AddAction {
        switch state {
        case .queued:
            state = .running
            return .add
        case .suspendedBeforeRunning:
            state = .suspendedBeforeRunning(handedToEngine: false)
            return .park
        case .finished:
            return .skip
        case .initialized, .running, .suspendedWhileRunning:
            // Not reachable: only `start`/`resume` enqueue, and they move to `queued`.
            return .skip
        }
    }

    package enum CompleteAction: Equatable {
        /// Deliver the result to the waiters.
        case deliver
        /// The caller already got `CancellationError`: drop the result.
        case discard
    }

    /// The engine finished the transfer (success or failure).
    package mutating func complete() -> CompleteAction {
        switch state {
        case .finished:
            return .discard
        case .initialized, .queued, .running, .suspendedBeforeRunning, .suspendedWhileRunning:
            state = .finished(cancelled: false)
            return .deliver
        }
    }
}
