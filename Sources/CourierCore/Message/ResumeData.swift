import Foundation

/// What it takes to finish an interrupted download: where it came from, the partial file and
/// how much of it is there, and the validator that proves the server still has the same
/// resource (`If-Range`, RFC 9110 section 13.1.5).
///
/// Get one from `DownloadTask.cancel(producingResumeData:)` or from the `resumeData` of a
/// `CourierError` that interrupted a download; pass it to
/// `HTTPSessionManager.downloadTask(resumingFrom:to:)`. It is `Codable` (and ``data`` gives a
/// JSON encoding) so it can be kept across launches.
public struct ResumeData: Sendable, Codable, Hashable {
    /// The URL the download was made from.
    public var url: URL
    /// The partial file, next to the destination: `.<destination name>.<8 hex digits>.download`
    /// (see `ResumeData.newPartialFile(for:)`, which `Courier` adds). Resuming refuses any other file.
    public var partialFile: URL
    /// How many bytes of the body the partial file holds. Resuming starts at this offset or at
    /// the file's real size, whichever is smaller; a negative value is refused.
    public var bytesWritten: Int64
    /// The response's `ETag` (preferred) or `Last-Modified`, sent as `If-Range`; nil when the
    /// server sent neither (then the rest is requested without a condition).
    public var validator: String?
    /// The headers the original call gave (they are sent again).
    public var headers: [String: String]
    /// The whole resource's length, when the interrupted response announced it: a resumed
    /// task's progress starts at ``bytesWritten`` of it.
    public var totalBytes: Int64?

    /// Creates resume data.
    public init(
        url: URL, partialFile: URL, bytesWritten: Int64, validator: String?, headers: [String: String] = [:],
        totalBytes: Int64? = nil
    ) {
        self.url = url
        self.partialFile = partialFile
        self.bytesWritten = bytesWritten
        self.validator = validator
        self.headers = headers
        self.totalBytes = totalBytes
    }

    /// A JSON encoding, for storing.
    public var data: Data {
        (try? JSONEncoder().encode(self)) ?? Data()
    }

    /// Decodes what ``data`` produced.
    public init(data: Data) throws {
        self = try JSONDecoder().decode(ResumeData.self, from: data)
    }
}
