import Foundation

/// A request body as the engine sends it: in memory, streamed from a file, from an
/// `AsyncSequence`, or from the parts of a multipart form, optionally gzip-compressed on the
/// way out.
package struct RequestBody: Sendable {
    package enum Content: Sendable {
        case data(Data)
        /// A whole file, read on demand (`CURLOPT_READFUNCTION`): constant memory.
        case file(path: String, length: Int64)
        /// Bytes from an `AsyncSequence`: with the bridge's declared length, or chunked.
        case stream(StreamBodyBridge)
        /// The segments of a multipart body, in order; the total length is known.
        case segments([BodySegment])
    }

    package var content: Content
    /// Compress with gzip (`Content-Encoding: gzip`); the length is then unknown.
    package var compressed = false

    package init(_ content: Content, compressed: Bool = false) {
        self.content = content
        self.compressed = compressed
    }

    /// The number of bytes on the wire, when known before sending.
    package var length: Int64? {
        if compressed { return nil }
        switch content {
        case .data(let data): return Int64(data.count)
        case .file(_, let length): return length
        case .stream(let bridge): return bridge.declaredLength
        case .segments(let segments): return segments.reduce(0) { $0 + $1.length }
        }
    }

    /// A small in-memory body goes through `CURLOPT_COPYPOSTFIELDS` rather than the read callback.
    package var smallData: Data? {
        guard !compressed, case .data(let data) = content, data.count <= 1 << 20 else { return nil }
        return data
    }

    /// A whole file (what a background session may upload).
    package var isFile: Bool {
        if case .file = content { return true }
        return false
    }

    /// Whether the body can be sent again (307/308 redirects, authentication retries).
    package var isReplayable: Bool {
        switch content {
        case .stream: return false
        case .segments(let segments): return !segments.contains { if case .stream = $0 { true } else { false } }
        default: return true
        }
    }
}

/// One piece of a composite body.
package enum BodySegment: Sendable {
    case data(Data)
    case file(path: String, offset: Int64, length: Int64)
    /// A stream that must deliver exactly `length` bytes.
    case stream(StreamBodyBridge, length: Int64)

    package var length: Int64 {
        switch self {
        case .data(let data): Int64(data.count)
        case .file(_, _, let length): length
        case .stream(_, let length): length
        }
    }
}

/// What a reader produced for `CURLOPT_READFUNCTION`.
package enum BodyRead {
    /// This many bytes were written into the buffer; 0 means the body is complete.
    case bytes(Int)
    /// Nothing available yet: pause sending until the reader calls its `onReadable`.
    case wait
    case failed(CourierError)
}
