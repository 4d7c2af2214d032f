import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// Where a download ends up, and how.
public struct DownloadOptions: OptionSet, Sendable, Hashable {
    /// The option bits.
    public let rawValue: Int

    /// Creates options from their bits.
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// Create the destination's missing parent directories.
    public static let createIntermediateDirectories = DownloadOptions(rawValue: 1 << 0)
    /// Replace a file already at the destination (atomically). Without it, an existing file
    /// fails the download with `fileSystem` before anything is sent.
    public static let replaceExisting = DownloadOptions(rawValue: 1 << 1)
}

/// A finished download: the file and the response it came with.
public struct DownloadResponse: Sendable {
    /// The request as sent (the final hop's).
    public var request: HTTPRequest
    /// The response head.
    public var response: HTTPResponse {
        get { head.response }
        set { head = ResponseHead(parsed: newValue) }
    }
    var head: ResponseHead
    /// Where the body is now.
    public var fileURL: URL
    /// Timing and size figures.
    public var metrics: TransferMetrics

    /// The status.
    public var status: HTTPResponse.Status { head.status }
    /// The header fields.
    public var headerFields: HTTPFields { response.headerFields }
}

/// A download written straight to disk: into a temporary file next to the destination, renamed
/// into place only when the transfer succeeded and the status is acceptable, so the destination
/// holds the whole body or nothing.
///
/// Await ``value`` for the file URL (or ``response``); watch ``downloadProgress``;
/// ``cancel(producingResumeData:)`` keeps the partial file and returns what
/// `downloadTask(resumingFrom:to:)` needs. A download that fails part way (a lost
/// connection) keeps its partial file too: the `CourierError`'s `resumeData` has it.
///
/// In a background session the task belongs to the session: cancelling the Swift task that
/// awaits it does not cancel it; only ``cancel()`` does.
public final class DownloadTask: Sendable {
    /// Identifies the task; a background task keeps it when a later process restores it.
    public let identifier: UUID
    private let control: TaskControl
    private let sink: DownloadSink
    private let resumeBase: @Sendable (DownloadSink.Result) -> ResumeData?
    private let ownedBySession: Bool
    private let task: Task<DownloadResponse, any Error>

    init(
        identifier: UUID = UUID(), control: TaskControl, sink: DownloadSink, ownedBySession: Bool = false,
        tracking: TaskTracking, resumeBase: @escaping @Sendable (DownloadSink.Result) -> ResumeData?,
        operation: @escaping @Sendable (TaskControl) async throws -> DownloadResponse
    ) {
        self.identifier = identifier
        self.control = control
        self.sink = sink
        self.resumeBase = resumeBase
        self.ownedBySession = ownedBySession
        let registration = tracking.register(control)
        taskIdentifier = registration.identifier
        self.task = Task { try await registration.run { try await operation(control) } }
    }

    /// The task's number in its manager's ``HTTPSessionManager/tasks`` (nil when the session
    /// had stopped taking tasks: the task then fails with `sessionInvalidated`).
    public let taskIdentifier: Int?

    /// The finished download. Throws `CourierError` (with `resumeData` when a partial file was
    /// kept) or `CancellationError`.
    public var response: DownloadResponse {
        get async throws { try await task.result(ownedBySession: ownedBySession, cancel: cancel) }
    }

    /// Where the downloaded file is.
    public var value: URL {
        get async throws { try await response.fileURL }
    }

    /// Body bytes received against the expected length.
    public var downloadProgress: AsyncStream<TransferProgress> { control.reporters.download.stream() }

    /// Request body bytes sent (usually none for a download).
    public var uploadProgress: AsyncStream<TransferProgress> { control.reporters.upload.stream() }

    /// Cancels the download and deletes what it wrote.
    public func cancel() {
        control.cancel()
        task.cancel()
    }

    /// Cancels the download. With `producingResumeData`, keeps the partial file and returns
    /// resume data for it, once the transfer has stopped writing; nil when nothing was
    /// written (or the download had already finished).
    public func cancel(producingResumeData: Bool) async -> ResumeData? {
        guard producingResumeData else {
            cancel()
            return nil
        }
        sink.keepPartialOnCancel()
        cancel()
        return resumeBase(await sink.result())
    }

    /// Pauses the transfer (or holds it if it has not started) until ``resume()``.
    public func suspend() { control.suspend() }

    /// Continues after ``suspend()``.
    public func resume() { control.resume() }

    /// Limits this download's bandwidth (bytes per second); nil lifts the limit.
    public func setMaximumBytesPerSecond(_ bytesPerSecond: Int64?) {
        control.setMaximumBytesPerSecond(bytesPerSecond)
    }
}
