import CCurlShim
import Foundation
import HTTPTypes
import Synchronization

/// One transfer: its lifecycle (shared by the caller's side and the driver thread) and the
/// state libcurl's callbacks fill in (driver thread only).
///
/// `@unchecked Sendable` because it is shared between threads by design: `lifecycle` (a
/// `Mutex`) guards the state machine, the result and the waiters; every other `var` is touched
/// only on the driver thread, between `CurlDriver.add` and `CurlDriver.detach`, and read by
/// nobody else until the result is published through `lifecycle`.
final class Transfer: @unchecked Sendable {
    private struct Lifecycle {
        var machine = TransferStateMachine()
        var result: Result<TransferOutput, any Error>?
        var waiters: [CheckedContinuation<TransferOutput, any Error>] = []
    }

    let original: TransferRequest
    let driver: CurlDriver
    let downloadProgress: ProgressReporter
    let uploadProgress: ProgressReporter
    private let lifecycle = Mutex(Lifecycle())

    // MARK: Driver-thread state

    /// The easy handle while the transfer is on the multi handle.
    var easy: UnsafeMutableRawPointer?
    /// The header list given to `CURLOPT_HTTPHEADER`; freed when the handle is detached.
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// The request of the current hop (redirects change URL, method, body and some headers).
    var current: TransferRequest
    var redirectCount = 0
    var head = ResponseHeadParser()
    /// The current hop is a redirect whose body is thrown away.
    var discardingBody = false
    var body = Data()
    var receivedBytes: Int64 = 0
    var expectedBytes: Int64?
    /// A failure found in a callback (e.g. the body grew past the limit), reported at the end.
    var callbackFailure: CourierError?
    /// Time spent on redirect hops before the current one.
    var earlierHopsDuration: Duration = .zero
    let errorBuffer: UnsafeMutablePointer<CChar>

    init(request: TransferRequest, driver: CurlDriver, reporters: TransferReporters = TransferReporters()) {
        self.original = request
        self.current = request
        self.driver = driver
        self.downloadProgress = reporters.download
        self.uploadProgress = reporters.upload
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        errorBuffer.deallocate()
    }

    // MARK: Caller side

    /// Hands the transfer to the driver unless it was cancelled or suspended first.
    func start() {
        let action = lifecycle.withLock { $0.machine.start() }
        if action == .enqueue { enqueue() }
    }

    private func enqueue() {
        if !driver.submit(.add(self)) {
            cancel()  // the session is shutting down
        }
    }

    /// Cancels; waiters get `CancellationError` now. Idempotent, callable from any thread.
    func cancel() {
        let (action, waiters) = lifecycle.withLock {
            state -> (TransferStateMachine.CancelAction, [CheckedContinuation<TransferOutput, any Error>]) in
            let action = state.machine.cancel()
            guard action != .none else { return (action, []) }
            state.result = .failure(CancellationError())
            defer { state.waiters = [] }
            return (action, state.waiters)
        }
        guard action != .none else { return }
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
        downloadProgress.finish(succeeded: false)
        uploadProgress.finish(succeeded: false)
        if action == .finishAndRemove { _ = driver.submit(.remove(self)) }
    }

    /// Pauses a running transfer in both directions, or holds one that has not started.
    func suspend() {
        let action = lifecycle.withLock { $0.machine.suspend() }
        if action == .pause { _ = driver.submit(.pause(self)) }
    }

    /// Undoes `suspend()`; starts the transfer if it was never started.
    func resume() {
        let action = lifecycle.withLock { $0.machine.resume() }
        switch action {
        case .enqueue: enqueue()
        case .unpause: _ = driver.submit(.unpause(self))
        case .none: break
        }
    }

    var isFinished: Bool { lifecycle.withLock { $0.machine.isFinished } }

    /// Waits for the result. When `cancelsWithCaller`, cancelling the awaiting Swift task cancels
    /// the transfer.
    func value(cancelsWithCaller: Bool = true) async throws -> TransferOutput {
        if cancelsWithCaller {
            return try await withTaskCancellationHandler {
                try await waitForResult()
            } onCancel: {
                self.cancel()
            }
        }
        return try await waitForResult()
    }

    private func waitForResult() async throws -> TransferOutput {
        try await withCheckedThrowingContinuation { continuation in
            let ready = lifecycle.withLock { state -> Result<TransferOutput, any Error>? in
                if let result = state.result { return result }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    // MARK: Driver side

    func driverWillAdd() -> TransferStateMachine.AddAction {
        lifecycle.withLock { $0.machine.driverWillAdd() }
    }

    /// Publishes the result, unless the caller cancelled first. Driver thread.
    func complete(with result: Result<TransferOutput, any Error>) {
        let waiters = lifecycle.withLock { state -> [CheckedContinuation<TransferOutput, any Error>]? in
            guard state.machine.complete() == .deliver else { return nil }
            state.result = result
            defer { state.waiters = [] }
            return state.waiters
        }
        guard let waiters else { return }
        let succeeded: Bool
        if case .success = result { succeeded = true } else { succeeded = false }
        downloadProgress.finish(succeeded: succeeded)
        uploadProgress.finish(succeeded: succeeded)
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// Resets the per-hop response state before (re)adding the easy handle.
    func beginHop() {
        head.reset()
        discardingBody = false
        body = Data()
        receivedBytes = 0
        expectedBytes = nil
        callbackFailure = nil
        errorBuffer[0] = 0
    }
}
