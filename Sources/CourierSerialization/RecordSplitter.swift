import CourierCore
import Foundation

/// Splits a byte stream into records at a separator byte, holding at most `maximumLength`
/// bytes of an unfinished record: the parser under ``LineSequence`` and
/// ``JSONRecordSequence``.
///
/// With the line feed as separator (lines, NDJSON, JSON Lines), a carriage return before it is
/// dropped too, so `\r\n` and `\n` both end a line. A record longer than the limit fails
/// ``feed(_:)`` with `CourierError.responseTooLarge(_:)`: a line that never ends would
/// otherwise take all memory.
public struct RecordSplitter: Sendable {
    /// The longest record by default: 1 MiB.
    public static let defaultMaximumLength = 1 << 20

    /// The byte that ends a record.
    public let separator: UInt8
    /// The longest record accepted, in bytes (without its separator).
    public let maximumLength: Int
    private var pending = Data()

    /// A splitter at `separator` (a line feed unless given).
    public init(separator: UInt8 = 0x0A, maximumLength: Int = defaultMaximumLength) {
        self.separator = separator
        self.maximumLength = max(1, maximumLength)
    }

    /// Whether bytes of an unfinished record are held.
    public var hasPartialRecord: Bool { !pending.isEmpty }

    /// The records `bytes` completes, in order, without their separators.
    public mutating func feed(_ bytes: Data) throws(CourierError) -> [Data] {
        var records: [Data] = []
        var start = bytes.startIndex
        while start < bytes.endIndex {
            guard let end = bytes[start...].firstIndex(of: separator) else {
                // One byte over is allowed only for a carriage return, which the line feed of
                // the next bytes drops.
                let held = pending.count + (bytes.endIndex - start)
                guard held <= maximumLength || (held == maximumLength + 1 && separator == 0x0A && bytes.last == 0x0D)
                else { throw tooLong() }
                pending.append(bytes[start...])
                break
            }
            var record: Data
            if pending.isEmpty {
                guard end - start <= maximumLength + 1 else { throw tooLong() }
                record = Data(bytes[start..<end])
            } else {
                guard pending.count + (end - start) <= maximumLength + 1 else { throw tooLong() }
                pending.append(bytes[start..<end])
                record = pending
                pending = Data()
            }
            if separator == 0x0A, record.last == 0x0D { record.removeLast() }
            guard record.count <= maximumLength else { throw tooLong() }
            records.append(record)
            start = end + 1
        }
        return records
    }

    /// The last record at the end of the stream, when the stream did not end with a
    /// separator (nil when it did).
    public mutating func finish() -> Data? {
        guard !pending.isEmpty else { return nil }
        defer { pending = Data() }
        var record = pending
        if separator == 0x0A, record.last == 0x0D { record.removeLast() }
        return record
    }

    private func tooLong() -> CourierError {
        .responseTooLarge(.init(message: "A record of the stream is longer than the limit of \(maximumLength) bytes"))
    }
}
