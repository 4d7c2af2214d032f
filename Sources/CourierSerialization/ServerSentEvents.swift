import CourierCore
import Foundation

/// One event of a `text/event-stream` (Server-Sent Events).
public struct ServerSentEvent: Sendable, Hashable {
    /// The event's type: the `event:` field, `"message"` when the event had none.
    public var event: String
    /// The `data:` lines, joined by line feeds.
    public var data: String
    /// The last event ID at the time of this event (the latest `id:` field of the stream, which
    /// a reconnection sends as `Last-Event-ID`); nil if none was set.
    public var id: String?
    /// The reconnection delay the stream set last (`retry:`), if any.
    public var retry: Duration?

    /// An event.
    public init(event: String = "message", data: String, id: String? = nil, retry: Duration? = nil) {
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry
    }
}

/// Parses a `text/event-stream` body as the WHATWG HTML standard's "event stream
/// interpretation" says: UTF-8, lines ended by CR LF, LF or CR (also when a chunk ends between
/// CR and LF), a leading byte-order mark dropped, `:` comments ignored, `field: value` with
/// one leading space removed, `id` values with NUL ignored, `retry` only when all digits, and
/// an event dispatched at each blank line when it has data. What is left at the end of the
/// stream without a blank line is not an event.
///
/// A line longer than `maximumLineLength` bytes, or an event whose data, type and ID together
/// pass `maximumEventSize` bytes, fails `feed(_:)` with `CourierError.responseTooLarge(_:)`:
/// a stream whose line never ends would otherwise take all memory.
public struct ServerSentEventParser: Sendable {
    /// The longest line by default: 1 MiB.
    public static let defaultMaximumLineLength = 1 << 20
    /// The largest event by default: 8 MiB.
    public static let defaultMaximumEventSize = 8 << 20

    /// The last event ID buffer: survives events, and a reconnection sends it.
    public private(set) var lastEventID: String?
    /// The reconnection delay from the last valid `retry:` field.
    public private(set) var retry: Duration?
    /// The longest line accepted, in bytes (without its line end).
    public let maximumLineLength: Int
    /// The largest event accepted, in bytes of data (with its line feeds), type and ID.
    public let maximumEventSize: Int

    private var line: [UInt8] = []
    private var afterCR = false
    private var atStart = true
    private var eventType = ""
    private var data = ""
    private var hasData = false

    /// A parser; `lastEventID` continues a stream that was reconnected.
    public init(
        lastEventID: String? = nil, maximumLineLength: Int = defaultMaximumLineLength,
        maximumEventSize: Int = defaultMaximumEventSize
    ) {
        self.lastEventID = lastEventID
        self.maximumLineLength = max(1, maximumLineLength)
        self.maximumEventSize = max(1, maximumEventSize)
    }

    /// Whether the bytes fed so far end inside an event: data lines without the blank line that
    /// dispatches them, or a line without its end. A stream that ends here was cut short.
    public var isInsideEvent: Bool { hasData || !line.isEmpty }

    /// The events completed by `data` (see the generic `feed(_:)`): a chunk of a
    /// response, scanned in place, a line's bytes appended at once.
    public mutating func feed(_ data: Data) throws(CourierError) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        var failure: CourierError?
        data.withUnsafeBytes { buffer in
            do throws(CourierError) {
                try feed(buffer: buffer, into: &events)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return events
    }

    private mutating func feed(
        buffer: UnsafeRawBufferPointer, into events: inout [ServerSentEvent]
    ) throws(CourierError) {
        var index = 0
        let count = buffer.count
        while index < count {
            if afterCR {
                afterCR = false
                if buffer[index] == 0x0A {  // the LF of a CR LF
                    index += 1
                    continue
                }
            }
            var end = index
            while end < count, buffer[end] != 0x0A, buffer[end] != 0x0D { end += 1 }
            if end > index {
                guard line.count + (end - index) <= maximumLineLength else {
                    throw .responseTooLarge(
                        .init(message: "An event stream line is longer than the limit of \(maximumLineLength) bytes"))
                }
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index..<end]))
                if atStart, line.count >= 3 {
                    atStart = false
                    if line[0] == 0xEF, line[1] == 0xBB, line[2] == 0xBF { line.removeFirst(3) }
                }
            }
            guard end < count else { return }
            afterCR = buffer[end] == 0x0D
            try endLine(into: &events)
            index = end + 1
        }
    }

    /// The events completed by `bytes`. Throws `CourierError.responseTooLarge(_:)` when a
    /// line or an event passes its limit; the parser is then spent.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(CourierError) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if afterCR {
                afterCR = false
                if byte == 0x0A { continue }  // the LF of a CR LF
            }
            switch byte {
            case 0x0D:
                afterCR = true
                try endLine(into: &events)
            case 0x0A:
                try endLine(into: &events)
            default:
                guard line.count < maximumLineLength else {
                    throw .responseTooLarge(
                        .init(message: "An event stream line is longer than the limit of \(maximumLineLength) bytes"))
                }
                line.append(byte)
                if atStart, line.count == 3 {
                    atStart = false
                    if line == [0xEF, 0xBB, 0xBF] { line.removeAll() }
                }
            }
        }
        return events
    }

    private mutating func endLine(into events: inout [ServerSentEvent]) throws(CourierError) {
        atStart = false
        let text = String(decoding: line, as: UTF8.self)
        line.removeAll(keepingCapacity: true)
        if text.isEmpty {
            dispatch(into: &events)
            return
        }
        if text.hasPrefix(":") { return }
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.hasPrefix(" ") { value = value.dropFirst() }
        } else {
            field = text[...]
            value = ""
        }
        switch field {
        case "event":
            eventType = String(value)
        case "data":
            data += value
            data += "\n"
            hasData = true
            guard data.utf8.count + eventType.utf8.count + (lastEventID?.utf8.count ?? 0) <= maximumEventSize else {
                throw .responseTooLarge(
                    .init(message: "An event stream event is larger than the limit of \(maximumEventSize) bytes"))
            }
        case "id":
            if !value.contains("\0") { lastEventID = String(value) }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ $0.isASCII && $0.isNumber }), let milliseconds = Int64(value) {
                retry = .milliseconds(milliseconds)
            }
        default:
            break
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        defer {
            eventType = ""
            data = ""
            hasData = false
        }
        guard hasData else { return }
        data.removeLast()  // the line feed after the last data line
        events.append(
            ServerSentEvent(
                event: eventType.isEmpty ? "message" : eventType, data: data, id: lastEventID, retry: retry))
    }
}
