@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation

/// What a manager made with `.background(identifier:)` has beyond any other: the identifier's
/// lock, the task journal, the event hub, and the running tasks that `invalidateAndCancel()`
/// cancels for good.
///
/// Lifecycle of a background task's journal entry:
/// - written (and fsynced) before its request is sent;
/// - updated with the response's validator when the head arrives;
/// - removed when the task finishes, fails, or is cancelled with `cancel()`;
/// - kept when the task is only interrupted: the process dies, or the manager is released
///   while it runs. A later manager with the same identifier carries it on.
final class BackgroundSession: Sendable {
    let identifier: String
    let directory: URL
    /// The identifier's lock, or why it could not be taken (`sessionIdentifierInUse`).
    private let lock: Result<SessionLock, CourierError>
    let journal: BackgroundJournal
    let events = SessionEventHub()
    /// How to cancel each running task for good, by identifier. Guarded by its lock.
    private let running = Locked([UUID: @Sendable () -> Void]())
    /// The restoration, started by the first `restoredTasks()`. Guarded by its lock.
    let restoration = Locked<Task<[BackgroundTask], Never>?>(nil)

    init(identifier: String, directory: URL) {
        self.identifier = identifier
        self.directory = directory
        self.journal = BackgroundJournal(directory: directory.appendingPathComponent("tasks"))
        self.lock = Result { () throws(CourierError) in try SessionLock.acquire(in: directory, identifier: identifier) }
    }

    /// Throws `sessionIdentifierInUse` (or the file-system error) when this session does not
    /// hold its identifier: nothing may be sent or journaled then.
    func checkIdentifier() throws(CourierError) {
        if case .failure(let error) = lock { throw error }
    }

    /// Journals a task (durably) before its request is sent, and records it as running;
    /// `cancelAll()` (`invalidateAndCancel()`) reaches it through `cancel`.
    func begin(_ record: BackgroundRecord, cancel: @escaping @Sendable () -> Void) async throws(CourierError) {
        try checkIdentifier()
        try await journal.save(record)
        running.withLock { $0[record.identifier] = cancel }
    }

    /// A task ended: in most cases for good (its journal entry goes, `discarding` names a
    /// partial file the caller cancelled without wanting, and subscribers hear of it); but a
    /// task that was only interrupted, cancelled by the session ending rather than by its
    /// `cancel()`, stays in the journal for the next process.
    func taskEnded(
        _ identifier: UUID, control: TaskControl, _ outcome: SessionEvent.Outcome, discarding partialFile: URL? = nil
    ) async {
        running.withLock { $0[identifier] = nil }
        if case .failed(let error) = outcome, error is CancellationError, !control.isCancelled {
            return  // interrupted: carried on by the next manager with this identifier
        }
        await journal.remove(identifier)
        if let partialFile { unlink(partialFile.path) }
        events.emit(SessionEvent(taskIdentifier: identifier, outcome: outcome))
    }

    /// Cancels every running task for good (`invalidateAndCancel()`).
    func cancelAll() {
        let cancels = running.withLock { Array($0.values) }
        for cancel in cancels { cancel() }
    }

    /// The session is over: the identifier is free, the event streams end.
    func close() {
        if case .success(let lock) = lock { lock.release() }
        events.finish()
    }

    deinit {
        close()
    }
}
