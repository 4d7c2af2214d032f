import CourierCore
import CourierJSON
import Foundation

// Typed elements over a byte stream (a `ByteStream`, or any `AsyncSequence` of `Data`):
// lines, NDJSON / JSON Lines, JSON text sequences (RFC 7464), and decoded Server-Sent Events.
// Each pulls from the stream under it only when its consumer asks for the next element, so a
// consumer that stops reading stops the transfer (the stream's backpressure), and each holds
// at most one unfinished element, of at most `maximumLength` bytes.

extension AsyncSequence where Element == Data {
    /// The stream's lines as UTF-8 text, without their line ends (`\n` or `\r\n`). A last line
    /// without a line end is a line too. A line that is not valid UTF-8 fails the sequence with
    /// `CourierError.serializationFailed(_:)` (nothing is replaced); a line longer than 1 MiB
    /// with `responseTooLarge(_:)`.
    ///
    /// ```swift
    /// for try await line in api.bytes(.get, "logs/tail").lines { print(line) }
    /// ```
    public var lines: LineSequence<Self> {
        LineSequence(base: self, maximumLength: RecordSplitter.defaultMaximumLength)
    }

    /// The stream's lines, each at most `maximumLength` bytes (see ``lines``).
    public func lines(maximumLength: Int) -> LineSequence<Self> {
        LineSequence(base: self, maximumLength: maximumLength)
    }

    /// The stream as NDJSON / JSON Lines: each line one JSON text, decoded as `type` with
    /// `decoder`; blank lines are skipped. A line that does not decode fails the sequence with
    /// `CourierError.serializationFailed(_:)` naming the line; a line longer than
    /// `maximumLength` bytes (1 MiB by default) with `responseTooLarge(_:)`.
    ///
    /// ```swift
    /// for try await chunk in api.bytes(.post, "api/generate", parameters: prompt).jsonLines(as: Chunk.self) {
    ///     print(chunk.response, terminator: "")
    /// }
    /// ```
    public func jsonLines<Value: Decodable>(
        as type: Value.Type, decoder: JSONDecoder = JSONDecoder(),
        maximumLength: Int = RecordSplitter.defaultMaximumLength
    ) -> JSONRecordSequence<Self, Value> {
        JSONRecordSequence(base: self, separator: 0x0A, decoder: decoder, maximumLength: maximumLength)
    }

    /// The stream as a JSON text sequence (RFC 7464, `application/json-seq`): records that
    /// each start with the record separator (0x1E) and hold one JSON text, decoded as `type`
    /// with `decoder`. Empty records are skipped; a record that does not decode fails the
    /// sequence with `CourierError.serializationFailed(_:)`, as does a stream that does not
    /// start with a record separator; a record longer than `maximumLength` bytes with
    /// `responseTooLarge(_:)`.
    public func jsonTextSequence<Value: Decodable>(
        as type: Value.Type, decoder: JSONDecoder = JSONDecoder(),
        maximumLength: Int = RecordSplitter.defaultMaximumLength
    ) -> JSONRecordSequence<Self, Value> {
        JSONRecordSequence(base: self, separator: 0x1E, decoder: decoder, maximumLength: maximumLength)
    }
}

/// Pulls records (split at a separator) from a byte stream, one chunk at a time.
struct RecordReader<Base: AsyncIteratorProtocol> where Base.Element == Data {
    var base: Base
    var splitter: RecordSplitter
    private var ready: [Data] = []
    private var index = 0
    private var ended = false
    /// Records handed out so far.
    private(set) var count = 0

    init(base: Base, separator: UInt8, maximumLength: Int) {
        self.base = base
        splitter = RecordSplitter(separator: separator, maximumLength: maximumLength)
    }

    /// The next record, or nil at the end of the stream.
    mutating func next() async throws -> Data? {
        while index == ready.count {
            guard !ended else { return nil }
            ready.removeAll(keepingCapacity: true)
            index = 0
            if let chunk = try await base.next() {
                ready = try splitter.feed(chunk)
            } else {
                ended = true
                if let last = splitter.finish() { ready = [last] }
            }
        }
        defer { index += 1 }
        count += 1
        return ready[index]
    }
}

/// The lines of a byte stream as `String`s (see `AsyncSequence.lines`).
public struct LineSequence<Base: AsyncSequence>: AsyncSequence where Base.Element == Data {
    /// A line, without its line end.
    public typealias Element = String

    let base: Base
    let maximumLength: Int

    /// Starts iterating the stream under it.
    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: RecordReader(base: base.makeAsyncIterator(), separator: 0x0A, maximumLength: maximumLength))
    }

    /// Iterates the lines.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: RecordReader<Base.AsyncIterator>

        /// The next line, or nil at the end of the stream.
        public mutating func next() async throws -> String? {
            guard let record = try await reader.next() else { return nil }
            guard let line = String(validating: record, as: UTF8.self) else {
                throw CourierError.serializationFailed(
                    .init(message: "Line \(reader.count) of the stream is not valid UTF-8"))
            }
            return line
        }
    }
}

extension LineSequence: Sendable where Base: Sendable {}

/// JSON records of a byte stream decoded as `Value` (see `AsyncSequence.jsonLines(as:)` and
/// `jsonTextSequence(as:)`).
public struct JSONRecordSequence<Base: AsyncSequence, Value: Decodable>: AsyncSequence where Base.Element == Data {
    /// A decoded record.
    public typealias Element = Value

    let base: Base
    let separator: UInt8
    let decoder: JSONDecoder
    let maximumLength: Int

    /// Starts iterating the stream under it.
    public func makeAsyncIterator() -> Iterator {
        Iterator(
            reader: RecordReader(base: base.makeAsyncIterator(), separator: separator, maximumLength: maximumLength),
            decoder: decoder, textSequence: separator == 0x1E)
    }

    /// Iterates the decoded records.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: RecordReader<Base.AsyncIterator>
        let decoder: JSONDecoder
        let textSequence: Bool

        /// The next record, decoded, or nil at the end of the stream.
        public mutating func next() async throws -> Value? {
            while let record = try await reader.next() {
                if textSequence, reader.count == 1 {
                    // The bytes before the first record separator: none are allowed.
                    guard record.allSatisfy(isJSONWhitespace) else {
                        throw CourierError.serializationFailed(
                            .init(message: "A JSON text sequence must start with a record separator (0x1E)"))
                    }
                    continue
                }
                guard !record.allSatisfy(isJSONWhitespace) else { continue }
                return try JSONElementDecoding.decode(
                    Value.self, from: record, decoder: decoder,
                    what: textSequence ? "Record \(reader.count - 1)" : "Line \(reader.count)")
            }
            return nil
        }
    }
}

extension JSONRecordSequence: Sendable where Base: Sendable {}

/// JSON's whitespace (RFC 8259): space, tab, line feed, carriage return.
private func isJSONWhitespace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
}

/// One element of a stream decoded as JSON: the tape decoder first, `JSONDecoder` when it
/// cannot vouch for the answer (as `DecodableResponseSerializer` does).
enum JSONElementDecoding {
    static func decode<Value: Decodable>(
        _ type: Value.Type, from data: Data, decoder: JSONDecoder, what: String
    ) throws(CourierError) -> Value {
        do {
            return try decoder.decodeTapeFirst(Value.self, from: data)
        } catch {
            let preview = String(decoding: data.prefix(200), as: UTF8.self)
            throw .serializationFailed(
                .init(
                    message:
                        "\(what) of the stream cannot be decoded as \(Value.self): \(error) (it begins: \(preview))",
                    underlyingError: decodingFailure(error)))
        }
    }
}

extension AsyncSequence where Element == ServerSentEvent {
    /// Each event's data decoded as JSON into `type`, as model APIs stream their answers;
    /// with `sentinel`, the sequence ends at the first event whose data is exactly it (such as
    /// `"[DONE]"`), and a stream that ends before it fails with
    /// `CourierError.connectionLost(_:)`: an answer cut short is not taken for a whole one.
    ///
    /// ```swift
    /// let deltas = api.events(.post, "v1/chat/completions", parameters: request)
    ///     .decoding(ChatDelta.self, until: "[DONE]")
    /// for try await delta in deltas { print(delta.text, terminator: "") }
    /// ```
    ///
    /// An event whose data does not decode fails the sequence with `serializationFailed(_:)`
    /// (filter the events first where a stream mixes types: `.filter { $0.event == "delta" }`).
    /// Stopping the iteration stops the stream under it.
    public func decoding<Value: Decodable>(
        _ type: Value.Type, until sentinel: String? = nil, decoder: JSONDecoder = JSONDecoder()
    ) -> DecodedEventSequence<Self, Value> {
        DecodedEventSequence(base: self, sentinel: sentinel, decoder: decoder)
    }
}

/// Server-Sent Events whose data is decoded as `Value` (see `AsyncSequence.decoding(_:until:decoder:)`).
public struct DecodedEventSequence<Base: AsyncSequence, Value: Decodable>: AsyncSequence
where Base.Element == ServerSentEvent {
    /// A decoded event.
    public typealias Element = Value

    let base: Base
    let sentinel: String?
    let decoder: JSONDecoder

    /// Starts iterating the events under it.
    public func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), sentinel: sentinel, decoder: decoder)
    }

    /// Iterates the decoded events.
    public struct Iterator: AsyncIteratorProtocol {
        /// The events under it; let go at the end (at the sentinel: the stream under it, and
        /// its connection, end then, not when this iterator goes away).
        var base: Base.AsyncIterator?
        let sentinel: String?
        let decoder: JSONDecoder
        private var count = 0

        init(base: Base.AsyncIterator, sentinel: String?, decoder: JSONDecoder) {
            self.base = base
            self.sentinel = sentinel
            self.decoder = decoder
        }

        /// The next event's data, decoded; nil at the sentinel or at the end of the stream.
        public mutating func next() async throws -> Value? {
            guard base != nil else { return nil }
            let event: ServerSentEvent?
            do {
                event = try await base?.next()
            } catch {
                base = nil
                throw error
            }
            guard let event else {
                base = nil
                if let sentinel {
                    throw CourierError.connectionLost(
                        .init(message: "The event stream ended after \(count) events, before its '\(sentinel)'"))
                }
                return nil
            }
            if let sentinel, event.data == sentinel {
                base = nil
                return nil
            }
            count += 1
            do {
                return try JSONElementDecoding.decode(
                    Value.self, from: Data(event.data.utf8), decoder: decoder,
                    what: "Event \(count) ('\(event.event)')")
            } catch {
                base = nil  // a failed sequence ends, and lets its stream go
                throw error
            }
        }
    }
}

extension DecodedEventSequence: Sendable where Base: Sendable {}
