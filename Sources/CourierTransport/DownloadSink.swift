@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// Writes a download's body straight to a file.
///
/// A fresh download writes into a new temporary file next to the destination; a resumed one
/// appends to the partial file after a 206 (or starts it over after a 200). Responses that
/// are not 2xx are kept in memory (up to 1 MiB) for the error instead. When the transfer ends
/// the file is closed and, on success, left for the task to validate and rename into place;
/// after a cancellation that asked for resume data, or a failure, the partial file stays;
/// otherwise a file this sink created is deleted.
///
/// `@unchecked Sendable`: the file descriptor and counters are touched only on the engine
/// thread (between `begin` and `end`); `shared` (a `Locked`) holds what other threads read:
/// the phase, the resume-data request and the waiters for the end.
package final class DownloadSink: ResponseSink, @unchecked Sendable {
    /// What survives the transfer.
    package enum Result: Sendable {
        /// The whole body is in `file`; `suggestedName` comes from `Content-Disposition`.
        case complete(file: URL, bytes: Int64, suggestedName: String?)
        /// A partial file that a resumed download can finish; `total` is the whole resource's
        /// length when the response announced it.
        case partial(file: URL, bytes: Int64, validator: String?, total: Int64?)
        /// Nothing on disk (the body of an error response is returned in memory).
        case none
    }

    private enum Phase {
        case idle
        case writing
        case abandoned
        case ended(Result)
    }

    private struct Shared {
        var phase = Phase.idle
        /// Readied for another attempt (idle again): `result()` waits for that attempt.
        var readied = false
        var wantsPartial = false
        var sourceURL: String?
        var waiters: [CheckedContinuation<Result, Never>] = []
    }

    package let file: URL
    /// The bytes of `file` this response continues; nil for a fresh download. Set again when
    /// the sink is readied for another attempt.
    private(set) var resumeOffset: Int64?
    /// The validator for `If-Range` when the sink asks for the rest of a partial file.
    private var resumeValidator: String?
    /// What the readied sink asked the next request to carry.
    private var readiedFields = HTTPFields()
    /// The bytes already on disk that this response continues (set by `begin` after a 206).
    package private(set) var progressOffset: Int64 = 0
    /// The partial file of a resumed download, opened (and checked) when the task was made;
    /// taken over by `begin`, closed by `end` or, if the transfer never began, on release.
    private var resumeDescriptor: Int32
    /// A background download keeps its partial file when it is interrupted (the session ended
    /// under it), not only when the caller asks for resume data.
    private let keepsPartialWhenInterrupted: Bool
    /// Told the response's validator (`ETag`, else `Last-Modified`) when a 2xx head arrives,
    /// on the engine thread: the background journal records it for a later `If-Range`.
    private let validatorArrived: (@Sendable (String?) -> Void)?
    private let shared = Locked(Shared())

    // Engine thread.
    private var descriptor: Int32 = -1
    private var createdFile = false
    private var written: Int64 = 0
    private var validator: String?
    private var suggestedName: String?
    private var errorBody: MemorySink?
    private var alreadyComplete = false
    /// The whole resource's length, when the response announced it (for resume data).
    private var total: Int64?
    /// A 206's end: the file offset after the last byte its `Content-Range` announced. The
    /// body may not go past it, and must reach it.
    private var rangeEnd: Int64?

    /// `file` is a new temporary file; with `resuming`, the sink finishes that partial file
    /// instead (and owns its descriptor).
    package init(
        file: URL, resuming partial: ResumeData.OpenedPartialFile? = nil, validator: String? = nil,
        keepsPartialWhenInterrupted: Bool = false, validatorArrived: (@Sendable (String?) -> Void)? = nil
    ) {
        self.file = partial?.file ?? file
        self.resumeOffset = partial?.offset
        self.resumeValidator = validator
        self.resumeDescriptor = partial?.descriptor ?? -1
        self.keepsPartialWhenInterrupted = keepsPartialWhenInterrupted
        self.validatorArrived = validatorArrived
    }

    // MARK: Engine side

    package func begin(_ head: RecordedHead, expectedLength: Int64?) -> CourierError? {
        let proceed = shared.withLock { shared -> Bool in
            guard case .idle = shared.phase else { return false }
            shared.phase = .writing
            shared.readied = false
            return true
        }
        guard proceed else { return .fileSystem(.init(url: nil, message: "The download was cancelled")) }
        written = 0  // an earlier attempt's count (a 206 sets it to the offset below)
        rangeEnd = nil
        let status = head.statusCode
        if let resumeOffset, status == 206 {
            // A 206 continues the partial file only if it is the rest of the same version: the
            // range starts at the file's end, and the validator is the one `If-Range` sent.
            // Otherwise the file is left as it was, for another try.
            let range = head.lastValue(of: "content-range").flatMap(ContentRange.init)
            if let problem = Self.continuationProblem(range, head, offset: resumeOffset, validator: resumeValidator) {
                written = resumeOffset
                validator = resumeValidator
                total = nil
                return problem
            }
            rangeEnd = range?.end.map { $0 + 1 }
            total = range?.total
        } else if (200..<300).contains(status) {
            total = expectedLength
        }
        validator = head.lastValue(of: "etag") ?? head.lastValue(of: "last-modified")
        suggestedName = head.lastValue(of: "content-disposition").flatMap(ContentDisposition.fileName)
        if let resumeOffset, status == 416,
            let total = head.lastValue(of: "content-range").flatMap(ContentRange.init)?.total, total == resumeOffset
        {
            // The partial file already holds the whole resource (anything past it goes).
            _ = ftruncate(resumeDescriptor, off_t(resumeOffset))
            alreadyComplete = true
            written = resumeOffset
            return nil
        }
        guard (200..<300).contains(status) else {
            errorBody = MemorySink(limit: nil)
            return nil
        }
        if let resumeOffset {
            if status == 206 {
                written = resumeOffset
                progressOffset = resumeOffset
            }
            // A 200: the server sends everything again (If-Range did not match), from offset 0.
            descriptor = resumeDescriptor
            resumeDescriptor = -1
        } else {
            descriptor = open(file.path, O_WRONLY | O_CLOEXEC | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644)
            guard descriptor >= 0 else {
                return .fileSystem(
                    .init(url: file, message: "Cannot open \(file.path): \(String(cString: strerror(errno)))"))
            }
            createdFile = true
        }
        validatorArrived?(validator)
        if resumeOffset != nil {
            // Resume exactly at the offset: anything past it goes (a previous attempt may have
            // written more than it recorded), and a 200 starts the file over.
            guard ftruncate(descriptor, off_t(written)) == 0, lseek(descriptor, off_t(written), SEEK_SET) >= 0 else {
                return .fileSystem(
                    .init(url: file, message: "Cannot prepare \(file.path): \(String(cString: strerror(errno)))"))
            }
        }
        return nil
    }

    package func write(_ bytes: UnsafeRawBufferPointer) -> SinkWrite {
        if let errorBody {
            if errorBody.collected.count < 1 << 20 { _ = errorBody.write(bytes) }
            return .accepted
        }
        guard descriptor >= 0 else { return .accepted }  // 416 for a complete file: no body to keep
        if let rangeEnd, written + Int64(bytes.count) > rangeEnd {
            // More than the range announced: whatever this body is, it is not that range, so
            // none of what it wrote stays.
            let offset = progressOffset
            written = ftruncate(descriptor, off_t(offset)) == 0 ? offset : 0
            return .failed(
                .invalidResponse(
                    .init(
                        message:
                            "The server sent more than the range it announced (bytes \(offset)-\(rangeEnd - 1)); "
                            + "the download keeps the \(offset) bytes it had")))
        }
        var offset = 0
        while offset < bytes.count {
            let count = Foundation.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                return .failed(
                    .fileSystem(
                        .init(url: file, message: "Cannot write \(file.path): \(String(cString: strerror(errno)))")))
            }
            offset += count
        }
        written += Int64(bytes.count)
        return .accepted
    }

    package func end(_ outcome: SinkOutcome) -> Data {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        if resumeDescriptor >= 0 {
            close(resumeDescriptor)
            resumeDescriptor = -1
        }
        let body = errorBody?.end(outcome) ?? Data()
        let wantsPartial = keepsPartialWhenInterrupted || shared.withLock { $0.wantsPartial }
        let result: Result
        let onDisk = errorBody == nil && (createdFile || resumeOffset != nil)
        switch outcome {
        case .completed where onDisk || alreadyComplete:
            result = .complete(file: file, bytes: written, suggestedName: suggestedName)
        case .failed where onDisk && written > 0, .cancelled where onDisk && written > 0 && wantsPartial:
            result = .partial(file: file, bytes: written, validator: validator, total: total)
        default:
            // Delete what this sink created; a resumed download's partial file goes too when
            // the caller cancelled without asking to keep it.
            if createdFile || (outcome == .cancelled && resumeOffset != nil && errorBody == nil) { unlink(file.path) }
            result = .none
        }
        let waiters = shared.withLock { shared -> [CheckedContinuation<Result, Never>] in
            shared.phase = .ended(result)
            defer { shared.waiters = [] }
            return shared.waiters
        }
        for waiter in waiters { waiter.resume(returning: result) }
        return body
    }

    /// A 206 that stopped before the end of its `Content-Range` (a connection closed cleanly
    /// part way, with no length to tell libcurl) is not a whole body: the transfer fails as a
    /// lost connection would, and the partial file is kept to continue.
    package func checkComplete() -> CourierError? {
        guard errorBody == nil, let rangeEnd, written < rangeEnd || (total.map { written < $0 } ?? false) else {
            return nil
        }
        let expected = total.map { "of \($0) " } ?? ""
        return .connectionLost(
            .init(
                message:
                    "The server ended the resumed download at byte \(written) \(expected)(its Content-Range "
                    + "announced bytes \(progressOffset)-\(rangeEnd - 1)); the partial file is kept"))
    }

    /// Why a 206 with `range` cannot continue a partial file of `offset` bytes whose version
    /// is `validator`; nil when it can.
    package static func continuationProblem(
        _ range: ContentRange?, _ head: RecordedHead, offset: Int64, validator: String?
    ) -> CourierError? {
        guard let range, let start = range.start, let end = range.end, start == offset, end >= start,
            range.total.map({ end < $0 }) ?? true
        else {
            return .invalidResponse(
                .init(
                    message:
                        "The server resumed the download at another range than bytes \(offset)- (\(range?.text ?? "none"))"
                ))
        }
        // `If-Range` held an entity tag or a date; the 206 must carry the same one, if it
        // carries one at all (RFC 9110 section 13.1.5: a strong match).
        if let validator {
            let isTag = validator.hasPrefix("\"") || validator.hasPrefix("W/")
            if let current = head.lastValue(of: isTag ? "etag" : "last-modified"), current != validator {
                return .invalidResponse(
                    .init(
                        message:
                            "The server resumed the download from another version (\(current), not \(validator)); "
                            + "the partial file is kept as it was"))
            }
        }
        return nil
    }

    deinit {
        if resumeDescriptor >= 0 { close(resumeDescriptor) }
    }

    // MARK: Between attempts

    package var takesAnotherAttempt: Bool { true }

    /// Readies the sink to continue what the last attempt left: the partial file from its
    /// end (with `Range` and `If-Range`), or a fresh start when nothing was kept. Nil when the
    /// body is complete, when bytes were kept but there is no validator to check that the
    /// rest belongs to them, or when the partial file cannot be opened again.
    package func prepareAnotherAttempt() async -> HTTPFields? {
        // Readied already, and no transfer took it (the attempt failed before its transfer):
        // the same again.
        if shared.withLock({ $0.readied }) { return readiedFields }
        let last = await result()
        switch last {
        case .complete:
            return nil
        case .partial(_, let bytes, let validator, _):
            guard let validator = validator ?? resumeValidator else { return nil }
            resumeOffset = bytes
            resumeValidator = validator
        case .none:
            if resumeOffset == nil {
                createdFile = false  // a fresh start; anything this sink made is gone
                return ready(HTTPFields())
            }
        }
        // Continue the partial file (a resumed download whose attempt kept nothing continues
        // it from where it was).
        guard let offset = resumeOffset else { return nil }
        let descriptor = open(file.path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        resumeDescriptor = descriptor
        written = offset  // what `end` reports if no transfer takes the sink
        var fields = HTTPFields()
        fields[.range] = "bytes=\(offset)-"
        if let resumeValidator { fields[.ifRange] = resumeValidator }
        return ready(fields)
    }

    private func ready(_ fields: HTTPFields) -> HTTPFields {
        readiedFields = fields
        errorBody = nil
        alreadyComplete = false
        progressOffset = 0
        shared.withLock { shared in
            shared.phase = .idle
            shared.readied = true
        }
        return fields
    }

    package func abandonAnotherAttempt(cancelled: Bool) {
        let readied = shared.withLock { shared -> Bool in
            guard case .idle = shared.phase, shared.readied else { return false }
            shared.phase = .writing  // a late `begin` refuses
            return true
        }
        if readied { _ = end(cancelled ? .cancelled : .failed) }
    }

    // MARK: Caller side

    /// The URL of the request, query included, recorded when the transfer is made (for
    /// resume data).
    package var sourceURL: String? {
        get { shared.withLock { $0.sourceURL } }
        set { shared.withLock { $0.sourceURL = newValue } }
    }

    /// Asks that a cancellation keep the partial file.
    package func keepPartialOnCancel() {
        shared.withLock { $0.wantsPartial = true }
    }

    /// Whether the caller asked for the partial file (resume data).
    package var callerWantsPartial: Bool { shared.withLock { $0.wantsPartial } }

    /// What the transfer left, once it has ended. Call it only after the transfer completed,
    /// failed or was cancelled: a sink that has not begun by then never will (a cancelled
    /// transfer that had no response yet), and ends at once with `.none`.
    package func result() async -> Result {
        await withCheckedContinuation { continuation in
            let ready = shared.withLock { shared -> Result? in
                switch shared.phase {
                case .ended(let result): return result
                case .abandoned: return Result.none
                case .idle where shared.readied:
                    shared.waiters.append(continuation)  // the next attempt, or its abandonment, ends it
                    return nil
                case .idle:
                    shared.phase = .abandoned  // if the engine gets to `begin` now, it refuses
                    return Result.none
                case .writing:
                    shared.waiters.append(continuation)
                    return nil
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// `Content-Range: bytes 100-199/1000` (RFC 9110 section 14.4), and `bytes */1000`.
package struct ContentRange {
    package var start: Int64?
    package var end: Int64?
    package var total: Int64?
    /// The header's value as received.
    package var text: String

    package init?(_ value: String) {
        text = value
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst(6)
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        total = Int64(parts[1])
        if parts[0] != "*" {
            let bounds = parts[0].split(separator: "-", maxSplits: 1)
            guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]) else { return nil }
            self.start = start
            self.end = end
        }
    }
}

/// The file name a `Content-Disposition` header suggests (RFC 6266), made safe to use as one
/// path component: no directories, no `..`, no control or format characters, no leading dot.
package enum ContentDisposition {
    package static func fileName(_ value: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in value.split(separator: ";").dropFirst() {
            let parts = parameter.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let name = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
            var raw = parts[1].trimmingCharacters(in: .whitespaces)
            if name == "filename*" {
                // RFC 8187: charset'language'percent-encoded
                let pieces = raw.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
                if pieces.count == 3, pieces[0].lowercased() == "utf-8" {
                    extended = String(pieces[2]).removingPercentEncoding
                }
            } else if name == "filename" {
                if raw.hasPrefix("\""), raw.hasSuffix("\""), raw.count >= 2 {
                    raw = String(raw.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"")
                }
                plain = raw
            }
        }
        return (extended ?? plain).flatMap(sanitized)
    }

    /// The last path component of `name`, without control characters, without format
    /// characters (the bidirectional overrides that make `invoice\u{202E}fdp.exe` display as
    /// `invoiceexe.pdf`, zero-width joiners and the like) or line separators, without
    /// surrounding spaces or leading dots; nil when nothing usable is left. Scalar by scalar:
    /// a `/` followed by a combining mark is still a separator.
    package static func sanitized(_ name: String) -> String? {
        let scalars = Array(name.unicodeScalars)
        let start = (scalars.lastIndex { $0 == "/" || $0 == "\\" }).map { $0 + 1 } ?? 0
        var kept = String.UnicodeScalarView()
        for scalar in scalars[start...] {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned, .privateUse:
                continue
            default:
                kept.append(scalar)
            }
        }
        var cleaned = Substring(String(kept))
        while let first = cleaned.unicodeScalars.first, first == "." || first.properties.isWhitespace {
            cleaned = Substring(cleaned.unicodeScalars.dropFirst())
        }
        while let last = cleaned.unicodeScalars.last, last.properties.isWhitespace {
            cleaned = Substring(cleaned.unicodeScalars.dropLast())
        }
        guard !cleaned.isEmpty, cleaned.utf8.count <= 255 else { return nil }
        return String(cleaned)
    }
}

extension ResumeData {
    /// The partial file, opened for finishing: its descriptor (read-write, the sink's to close)
    /// and the offset to resume from.
    package struct OpenedPartialFile: Sendable {
        package var file: URL
        package var descriptor: Int32
        /// `bytesWritten`, bounded by the bytes the file really holds.
        package var offset: Int64

        package init(file: URL, descriptor: Int32, offset: Int64) {
            self.file = file
            self.descriptor = descriptor
            self.offset = offset
        }
    }
}
