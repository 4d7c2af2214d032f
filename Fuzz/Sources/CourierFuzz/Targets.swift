import Foundation
import MultipartKit

@testable import Courier
@_spi(CourierInternals) @testable import CourierCore
@testable import CourierJSON
@testable import CourierSerialization
@testable import CourierStorage
@testable import CourierTransport

/// One function per hand-written parser: each must never crash, and each checks a property
/// that a wrong answer breaks (a round trip, an agreement with a standard implementation, or
/// an invariant the rest of Courier relies on).
enum FuzzTargets {
    static let all: [String: @Sendable (Data) -> Void] = [
        "json": json,
        "tape": tape,
        "head": head,
        "setcookie": setCookie,
        "cookiejar": cookieJar,
        "httpdate": httpDate,
        "cachecontrol": cacheControl,
        "disposition": disposition,
        "query": query,
        "multipart": multipart,
        "sse": serverSentEvents,
        "websocket": webSocketFrames,
        "wshandshake": webSocketHandshake,
    ]

    // MARK: WebSocket frames

    /// The events and the violation do not depend on how the bytes are cut into chunks (the
    /// first byte picks the chunk size): the events that completed before a violation are
    /// returned with it, whichever read brought it; each event, written again as a server's
    /// frame, reads back as itself; a text message is valid UTF-8 and no message passes the
    /// limit.
    static func webSocketFrames(_ data: Data) {
        guard let first = data.first else { return }
        let bytes = Array(data.dropFirst())
        // The first byte's top bit: permessage-deflate agreed (each reader its own state), so
        // RSV1 marks compressed messages, inflated within the same limit.
        let compressed = first & 0x80 != 0
        func reader() -> WebSocketFrameReader {
            var reader = WebSocketFrameReader(maximumMessageSize: 512)
            if compressed { reader.compression = WebSocketDeflater(WebSocketDeflateParameters()) }
            return reader
        }
        var whole = reader()
        let (wholeEvents, wholeViolation) = whole.read(bytes)
        var pieces = reader()
        var split: [WebSocketEvent] = []
        var splitError: WebSocketProtocolError?
        let size = Int(first % 16) + 1
        for start in stride(from: 0, to: bytes.count, by: size) {
            let (events, violation) = pieces.read(bytes[start..<min(start + size, bytes.count)])
            split += events
            if let violation {
                splitError = violation
                break
            }
        }
        fuzzCheck(
            wholeEvents == split && wholeViolation == splitError,
            "whole: \(wholeEvents) \(String(describing: wholeViolation)), in chunks of \(size): \(split) "
                + "\(String(describing: splitError))")
        // The throwing read agrees: the same events, or the same violation.
        var throwing = reader()
        let all = Result { () throws(WebSocketProtocolError) in try throwing.feed(bytes) }
        switch all {
        case .success(let events): fuzzCheck(wholeViolation == nil && events == wholeEvents, "feed: \(events)")
        case .failure(let error): fuzzCheck(wholeViolation == error, "feed: \(error)")
        }
        // Events before a violation are whole: each is checked and written back below.
        if let error = wholeViolation {
            fuzzCheck([1002, 1007, 1009].contains(error.closeCode), "close code \(error.closeCode)")
        }
        do {
            for event in wholeEvents {
                let frame: [UInt8]
                switch event {
                case .text(let text):
                    fuzzCheck(text.utf8.count <= 512, "a message past the limit")
                    frame = WebSocketFrameWriter.frame(.text, Array(text.utf8), mask: nil)
                case .binary(let payload):
                    fuzzCheck(payload.count <= 512, "a message past the limit")
                    frame = WebSocketFrameWriter.frame(.binary, payload, mask: nil)
                case .ping(let payload): frame = WebSocketFrameWriter.frame(.ping, payload, mask: nil)
                case .pong(let payload): frame = WebSocketFrameWriter.frame(.pong, payload, mask: nil)
                case .close(let code, let reason):
                    frame = WebSocketFrameWriter.frame(
                        .close, code.map { WebSocketFrameWriter.closePayload(code: $0, reason: reason) } ?? [],
                        mask: nil)
                }
                var again = reader()
                fuzzCheck((try? again.feed(frame)) == [event], "\(event) does not read back as itself")
                // A message compressed reads back as itself too.
                guard compressed, let deflater = WebSocketDeflater(WebSocketDeflateParameters()) else { continue }
                let (opcode, payload): (WebSocketOpcode, [UInt8])
                switch event {
                case .text(let text): (opcode, payload) = (.text, Array(text.utf8))
                case .binary(let bytes): (opcode, payload) = (.binary, bytes)
                default: continue
                }
                let deflated = payload.withUnsafeBytes { deflater.compress($0) }
                let compressedFrame = deflated.withUnsafeBytes {
                    WebSocketFrameWriter.frame(opcode, bytes: $0, mask: nil, compressed: true)
                }
                var inflating = reader()
                fuzzCheck(
                    (try? inflating.feed(compressedFrame)) == [event], "\(event) does not read back compressed")
            }
        }
    }

    // MARK: WebSocket handshake

    /// The opening handshake's request head, built from a fuzzed host, path, query and header
    /// fields (the input after its first byte, cut at NUL bytes: host, path, query, then
    /// name and value pairs; the first byte's low bits offer subprotocols and compression):
    /// either it is refused for a host or a field that holds a control character, or it has
    /// exactly the lines intended, every line break a CR LF, a request line of three parts
    /// whose target is the URL's own percent-encoded text and reads back as the same path and
    /// query.
    static func webSocketHandshake(_ data: Data) {
        guard let first = data.first else { return }
        let pieces = data.dropFirst().split(separator: 0, omittingEmptySubsequences: false).map { Array($0) }
        func text(_ index: Int) -> String {
            index < pieces.count ? String(decoding: pieces[index], as: UTF8.self) : ""
        }
        let path = text(1)
        let query = pieces.count > 2 && !pieces[2].isEmpty ? "?" + text(2) : ""
        guard let url = URL(string: "ws://\(text(0))\(path.hasPrefix("/") ? "" : "/")\(path)\(query)") else { return }
        let protocols = first & 1 != 0 ? ["v1", "v2"] : []
        let offersCompression = first & 2 != 0
        var fields = HTTPFields()
        var index = 3
        while index + 1 < pieces.count {
            if let name = HTTPField.Name(text(index)) {
                fields.append(HTTPField(name: name, lenientValue: pieces[index + 1]))
            }
            index += 2
        }
        let own: Set<String> = [
            "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
            "sec-websocket-extensions", "content-length", "transfer-encoding",
        ]
        let sent = fields.filter { !own.contains($0.name.canonicalName) }
        func isVisible(_ byte: UInt8) -> Bool { (0x21...0x7E).contains(byte) }
        let host = url.host ?? ""
        let badHost = host.isEmpty || !host.utf8.allSatisfy(isVisible)
        let badField = sent.contains { $0.value.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F } }
        let result = Result { () throws(CourierError) in
            try WebSocketHandshake.requestBytes(
                url: url, key: "k==", protocols: protocols, fields: fields, offersCompression: offersCompression)
        }
        let head: [UInt8]
        switch result {
        case .failure(let error):
            switch error {
            case .invalidURL: fuzzCheck(badHost, "\(url) refused: \(error)")
            case .invalidHeader: fuzzCheck(!badHost && badField, "\(sent) refused: \(error)")
            default: fuzzCheck(false, "unexpected \(error)")
            }
            return
        case .success(let bytes):
            fuzzCheck(!badHost && !badField, "\(url) with \(sent) was not refused")
            head = bytes
        }
        // Every CR starts a CR LF, every LF ends one, and no other control but a tab.
        for (offset, byte) in head.enumerated() {
            switch byte {
            case 0x0D: fuzzCheck(offset + 1 < head.count && head[offset + 1] == 0x0A, "a bare CR at \(offset)")
            case 0x0A: fuzzCheck(offset > 0 && head[offset - 1] == 0x0D, "a bare LF at \(offset)")
            case 0x09: break
            default: fuzzCheck(byte >= 0x20 && byte != 0x7F, "the control byte \(byte) at \(offset)")
            }
        }
        let textHead = String(decoding: head, as: UTF8.self)
        fuzzCheck(textHead.hasSuffix("\r\n\r\n"), "the head does not end with a blank line")
        // Bytes, not characters: CR LF is one character.
        let lines = String(decoding: head.dropLast(4), as: UTF8.self).components(separatedBy: "\r\n")
        let expectedCount = 6 + (protocols.isEmpty ? 0 : 1) + (offersCompression ? 1 : 0) + sent.count
        fuzzCheck(lines.count == expectedCount, "\(lines.count) lines, not \(expectedCount): \(lines)")
        let parts = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        fuzzCheck(
            parts.count == 3 && parts[0] == "GET" && parts[2] == "HTTP/1.1",
            "the request line \(lines[0].debugDescription)")
        let target = String(parts[1])
        fuzzCheck(target.utf8.allSatisfy(isVisible), "the target \(target.debugDescription)")
        // The URL's own text, as it spells it (and not decoded).
        let encodedPath = url.path(percentEncoded: true)
        let expected =
            (encodedPath.isEmpty ? "/" : encodedPath) + (url.query(percentEncoded: true).map { "?" + $0 } ?? "")
        fuzzCheck(
            target == WebSocketHandshake.percentEncodingInvisibleBytes(expected),
            "the target \(target.debugDescription) for \(url)")
        // It reads back as the same path and query (and so decodes to the same bytes).
        guard let back = URL(string: "ws://h\(target)") else { return fuzzCheck(false, "\(target) is not a URL's") }
        let backPath = back.path(percentEncoded: true)
        let backQuery = back.query(percentEncoded: true)
        fuzzCheck(
            backPath == (encodedPath.isEmpty ? "/" : encodedPath) && backQuery == url.query(percentEncoded: true),
            "\(target.debugDescription) reads back as \(backPath.debugDescription) \(String(describing: backQuery))")
        // The fields as given, in their order, after the handshake's own.
        let fieldLines = Array(lines.suffix(sent.count))
        for (line, field) in zip(fieldLines, sent) {
            fuzzCheck(line == "\(field.name.rawName): \(field.value)", "\(line.debugDescription) for \(field)")
        }
    }

    // MARK: Server-Sent Events

    /// The events do not depend on how the stream is cut into chunks (the first byte picks the
    /// chunk size), nor on which `feed` reads them (the whole stream byte by byte, the chunks
    /// as `Data` scanned in place), nor does a refusal; an event's data holds no CR and stays
    /// within the parser's limit, its ID holds no NUL.
    static func serverSentEvents(_ data: Data) {
        guard let first = data.first else { return }
        let bytes = Array(data.dropFirst())
        func parser() -> ServerSentEventParser { ServerSentEventParser(maximumLineLength: 64, maximumEventSize: 256) }
        var whole = parser()
        let all = try? whole.feed(bytes)
        var pieces = parser()
        var split: [ServerSentEvent]? = []
        let size = Int(first % 16) + 1
        for start in stride(from: 0, to: bytes.count, by: size) {
            guard let events = try? pieces.feed(Data(bytes[start..<min(start + size, bytes.count)])) else {
                split = nil
                break
            }
            split?.append(contentsOf: events)
        }
        fuzzCheck(all == split, "whole: \(String(describing: all)), in chunks of \(size): \(String(describing: split))")
        for event in all ?? [] {
            fuzzCheck(!event.data.contains("\r"), "a CR in the data of \(event)")
            fuzzCheck(event.data.utf8.count <= 256, "an event past the limit: \(event.data.utf8.count) bytes")
            fuzzCheck(!(event.id ?? "").contains("\0"), "a NUL in the id of \(event)")
        }
        fuzzCheck(whole.lastEventID == pieces.lastEventID || split == nil, "the last event IDs differ")
        fuzzCheck(whole.isInsideEvent == pieces.isInsideEvent || split == nil, "one parser is inside an event")
    }

    // MARK: JSON

    /// JSON's one grammar (the tape): what parses, written and parsed again (compact and
    /// pretty), is the same value; a refusal names a byte of the input; the decoding of a
    /// response never answers for text `JSON(parsing:)` refuses, and refuses nesting past the
    /// limit with the same error.
    static func json(_ data: Data) {
        let decoded = Result { () throws(JSONParsingError) in
            try TapeDecoding.decode(JSON.self, from: data, like: JSONDecoder())
        }
        let value: JSON
        do {
            value = try JSON(parsing: data)
        } catch let error as JSONParsingError {
            fuzzCheck(error.offset >= 0 && error.offset <= data.count, "offset \(error.offset) of \(data.count) bytes")
            switch decoded {
            case .success(let answer):
                fuzzCheck(
                    answer == nil && !error.isNestingTooDeep,
                    "parsing: \(error), the tape decoder: \(String(describing: answer))")
            case .failure(let refusal):
                fuzzCheck(refusal == error && error.isNestingTooDeep, "parsing: \(error), the tape decoder: \(refusal)")
            }
            return
        } catch {
            return fuzzCheck(false, "not a JSONParsingError: \(error)")
        }
        if case .failure(let refusal) = decoded {
            fuzzCheck(false, "the tape decoder refused \(refusal), parsing did not")
        }
        for pretty in [false, true] {
            let written = value.serialized(prettyPrinted: pretty)
            guard let again = try? JSON(parsing: written) else {
                return fuzzCheck(false, "the written form does not parse: \(written.text)")
            }
            fuzzCheck(again == value, "round trip changed \(value) into \(again)")
        }
    }

    /// Differential: whenever the tape decoder answers, `JSONDecoder` gives the same answer;
    /// where it refuses (nesting past the limit), `JSONDecoder` refuses too.
    static func tape(_ data: Data) {
        agree(Record.self, data)
        agree([String: Int].self, data)
        agree([Double].self, data)
        agree([String?].self, data)
        agree([Int8].self, data)
        agree([UInt64].self, data)
        agree(Bool.self, data)
        agree(String.self, data)
    }

    private static func agree<T: Decodable & Equatable>(_ type: T.Type, _ data: Data) {
        let decoder = JSONDecoder()
        let answer: T?
        do {
            answer = try TapeDecoding.decode(type, from: data, like: decoder)
        } catch {
            let reference = try? decoder.decode(type, from: data)
            return fuzzCheck(reference == nil, "the tape refused \(error) where JSONDecoder decoded \(reference!)")
        }
        guard let fast = answer else { return }
        guard let reference = try? decoder.decode(type, from: data) else {
            return fuzzCheck(false, "the tape decoded \(fast) where JSONDecoder fails")
        }
        fuzzCheck(fast == reference, "the tape decoded \(fast), JSONDecoder \(reference)")
    }

    struct Record: Decodable, Equatable {
        var id: Int
        var name: String
        var score: Double?
        var tags: [String]
        var flags: [String: Bool]?
        var child: Child?
    }

    struct Child: Decodable, Equatable {
        var id: Int64
        var ratio: Double
        var note: String?
    }

    // MARK: Response heads

    /// Lines as libcurl hands them over: a complete head has a status, a length that is not
    /// negative, and builds a response with that status.
    static func head(_ data: Data) {
        var parser = RecordedHead()
        var lineStart = data.startIndex
        var index = data.startIndex
        while index < data.endIndex {
            if data[index] == 0x0A || index == data.endIndex - 1 {
                let line = data[lineStart...index]
                let result = line.withUnsafeBytes { parser.consume($0) }
                if case .invalid = result { return }
                if case .complete = result {
                    fuzzCheck((100...999).contains(parser.statusCode), "status \(parser.statusCode)")
                    fuzzCheck((parser.contentLength ?? 0) >= 0, "length \(parser.contentLength ?? 0)")
                    if let response = parser.response {
                        fuzzCheck(response.status.code == parser.statusCode, "status differs")
                    }
                }
                lineStart = index + 1
            }
            index += 1
        }
    }

    // MARK: Cookies

    static let cookieURL = URL(string: "https://www.example.com/dir/page")!
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    /// A cookie parsed from `Set-Cookie` holds no control characters, matches its own request
    /// host, and survives a trip through the cookie-file line libcurl is given.
    static func setCookie(_ data: Data) {
        guard let cookie = Cookie(setCookie: data.text, for: cookieURL, now: now) else { return }
        for field in [cookie.name, cookie.value, cookie.domain, cookie.path] {
            fuzzCheck(!hasControl(field), "control character in \(field.debugDescription)")
        }
        fuzzCheck(!cookie.name.isEmpty, "empty name")
        fuzzCheck(cookie.path.hasPrefix("/"), "path \(cookie.path.debugDescription)")
        fuzzCheck(
            "www.example.com" == cookie.domain || "www.example.com".hasSuffix("." + cookie.domain),
            "domain \(cookie.domain)")
        roundTrip(cookie)
    }

    /// A cookie-file line that parses, written and parsed again, is the same cookie.
    static func cookieJar(_ data: Data) {
        guard let cookie = Cookie(netscapeLine: Substring(data.text)) else { return }
        roundTrip(cookie)
    }

    private static func roundTrip(_ cookie: Cookie) {
        let line = cookie.netscapeLine
        fuzzCheck(
            line.split(separator: "\t", omittingEmptySubsequences: false).count == 7, "line \(line.debugDescription)")
        fuzzCheck(!line.contains("\n") && !line.contains("\r"), "line break in \(line.debugDescription)")
        guard let again = Cookie(netscapeLine: Substring(line)) else {
            return fuzzCheck(false, "\(line.debugDescription) does not parse back")
        }
        var expected = cookie
        // The file keeps whole seconds, at least 1 (0 means a session cookie).
        expected.expires = cookie.expires.map {
            Date(timeIntervalSince1970: TimeInterval(max(1, Int64($0.timeIntervalSince1970))))
        }
        fuzzCheck(again == expected, "\(cookie) came back as \(again)")
    }

    private static func hasControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    // MARK: Dates and Cache-Control

    static let imfFixdate: DateFormatter = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }()

    /// A parsed date is whole seconds, and its IMF-fixdate form parses to the same date.
    static func httpDate(_ data: Data) {
        guard let date = HTTPDate.parse(data.text) else { return }
        let seconds = date.timeIntervalSince1970
        fuzzCheck(seconds.rounded() == seconds, "fractional date \(seconds)")
        guard seconds >= -11_644_473_600, seconds < 253_402_300_800 else { return }  // years 1601 to 9999
        let text = imfFixdate.string(from: date)
        fuzzCheck(
            HTTPDate.parse(text) == date,
            "\(date) written as \(text) parses as \(String(describing: HTTPDate.parse(text)))")
        // The strict reading (a cache's Expires) accepts less than the tolerant one, and what it
        // accepts the tolerant one reads as the same date; IMF-fixdate passes both.
        if let strict = HTTPDate.parseStrict(data.text) {
            fuzzCheck(strict.timeIntervalSince1970.rounded() == strict.timeIntervalSince1970, "fractional \(strict)")
        }
        fuzzCheck(HTTPDate.parseStrict(text) == date, "\(text) is not a strict HTTP-date")
    }

    /// `max-age` and the other delta-seconds are finite and not negative, whatever the text
    /// (`max-stale` without a value is any staleness: infinite); an `Age` likewise.
    static func cacheControl(_ data: Data) {
        let control = CacheControl(data.fields)
        for (name, value) in [
            ("max-age", control.maxAge), ("stale-while-revalidate", control.staleWhileRevalidate),
            ("stale-if-error", control.staleIfError), ("min-fresh", control.minFresh),
        ] {
            if let value { fuzzCheck(value.isFinite && value >= 0, "\(name) \(value)") }
        }
        if let maxStale = control.maxStale { fuzzCheck(maxStale >= 0, "max-stale \(maxStale)") }
        let age = CachedResponse.ageValue(data.fields)
        fuzzCheck(age.isFinite && age >= 0 && age <= Double(1 << 31), "Age \(age)")
    }

    // MARK: Content-Disposition

    /// A suggested name is one visible path component: no separator, no leading dot or space,
    /// no control or format character, at most 255 bytes.
    static func disposition(_ data: Data) {
        for value in [data.text, "attachment; filename=\"\(data.text)\"", "attachment; filename*=UTF-8''\(data.text)"] {
            guard let name = ContentDisposition.fileName(value) else { continue }
            fuzzCheck(!name.isEmpty && name.utf8.count <= 255, "length of \(name.debugDescription)")
            fuzzCheck(
                !name.unicodeScalars.contains { $0 == "/" || $0 == "\\" }, "separator in \(name.debugDescription)")
            fuzzCheck(name != "." && name != "..", "\(name.debugDescription)")
            let first = name.unicodeScalars.first!
            fuzzCheck(first != "." && !first.properties.isWhitespace, "leading \(name.debugDescription)")
            fuzzCheck(
                !(name.unicodeScalars.last!.properties.isWhitespace), "trailing space in \(name.debugDescription)")
            fuzzCheck(
                !name.unicodeScalars.contains {
                    [.control, .format, .lineSeparator, .paragraphSeparator].contains($0.properties.generalCategory)
                }, "control or format character in \(name.debugDescription)")
        }
    }

    // MARK: Query strings

    /// Names and values from the input, encoded, decode (by Foundation's `URLComponents`) to the
    /// same pairs, in the encoder's order.
    static func query(_ data: Data) {
        let fields = data.fields
        var members: [String: JSON] = [:]
        var index = 0
        while index + 1 < fields.count {
            let value = fields[index + 1]
            members[fields[index]] = value == "\u{1}" ? .null : .string(value)
            index += 2
        }
        let parameters = JSON.object(members)
        guard let encoded = try? QueryStringEncoding.encode(parameters),
            let pairs = try? QueryStringEncoding.pairs(parameters)
        else { return fuzzCheck(false, "an object of strings was refused") }
        var components = URLComponents()
        components.percentEncodedQuery = encoded
        let decoded = (components.queryItems ?? []).map { ($0.name, $0.value) }
        fuzzCheck(
            decoded.count == pairs.count && zip(decoded, pairs).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 },
            "\(pairs) encoded as \(encoded.debugDescription) decodes as \(decoded)")
    }

    // MARK: Multipart forms

    /// Parts from the input (name, file name, type, content), written by Courier, parse back with
    /// multipart-kit's parser into the same parts; a type that would break the header block is
    /// refused instead.
    static func multipart(_ data: Data) {
        let fields = data.fields
        var form = Courier.MultipartFormData(boundary: "courier-fuzz-boundary-0123456789abcdef")
        var expected: [(name: String, fileName: String?, type: String?, content: Data)] = []
        var index = 0
        while index + 3 < fields.count {
            let name = fields[index]
            let fileName = fields[index + 1].isEmpty ? nil : fields[index + 1]
            let type = fields[index + 2].isEmpty ? nil : fields[index + 2]
            let content = Data(fields[index + 3].utf8)
            form.append(content, name: name, fileName: fileName, mimeType: type)
            expected.append((name, fileName, type ?? fileName.map(MIMEType.forFileName), content))
            index += 4
        }
        let breaks = expected.contains { $0.type?.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0 } ?? false }
        guard let segments = try? form.checkedSegments() else {
            return fuzzCheck(breaks, "a form without line breaks in its types was refused")
        }
        fuzzCheck(!breaks, "a type with a line break was written")
        guard !expected.isEmpty else { return }
        var body = Data()
        for segment in segments {
            guard case .data(let bytes) = segment else { return fuzzCheck(false, "a data part that is not data") }
            body.append(bytes)
        }
        fuzzCheck(Int64(body.count) == form.contentLength, "contentLength \(form.contentLength), body \(body.count)")
        let parser = MultipartParser(boundary: form.boundary)
        var parts: [(headers: [(String, String)], body: Data)] = []
        var headers: [(String, String)] = []
        var content = Data()
        parser.onHeader = { headers.append(($0, $1)) }
        parser.onBody = { buffer in content.append(contentsOf: buffer.readableBytesView) }
        parser.onPartComplete = {
            parts.append((headers, content))
            headers = []
            content = Data()
        }
        do {
            try parser.execute(Array(body))
        } catch {
            return fuzzCheck(false, "multipart-kit cannot parse the form: \(error)")
        }
        fuzzCheck(parts.count == expected.count, "\(expected.count) parts written, \(parts.count) parsed")
        for (part, want) in zip(parts, expected) {
            fuzzCheck(part.body == want.content, "content of part \(want.name.debugDescription)")
            let disposition = part.headers.first { $0.0.lowercased() == "content-disposition" }?.1 ?? ""
            var wanted = "form-data; name=\"\(Courier.MultipartFormData.quoted(want.name))\""
            if let fileName = want.fileName { wanted += "; filename=\"\(Courier.MultipartFormData.quoted(fileName))\"" }
            fuzzCheck(
                disposition == wanted, "disposition \(disposition.debugDescription), wanted \(wanted.debugDescription)")
            // Parsers drop a field value's surrounding spaces and tabs (RFC 9110 section 5.5).
            let spaces = CharacterSet(charactersIn: " \t")
            let type = part.headers.first { $0.0.lowercased() == "content-type" }?.1.trimmingCharacters(in: spaces)
            let wantedType = want.type?.trimmingCharacters(in: spaces)
            fuzzCheck(type == wantedType, "type \(type.debugDescription), wanted \(wantedType.debugDescription)")
            fuzzCheck(part.headers.count == (want.type == nil ? 1 : 2), "headers \(part.headers)")
        }
    }
}
