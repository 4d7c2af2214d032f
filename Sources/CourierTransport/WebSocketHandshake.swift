import CourierCore
import Foundation
import HTTPTypes

/// The opening handshake of a WebSocket (RFC 6455 section 4): the client's `GET` with
/// `Upgrade: websocket`, and the checks of the server's `101` answer.
package enum WebSocketHandshake {
    /// The GUID the server appends to the key before hashing it (section 1.3).
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// The ws or wss URL that an http or https handshake URL stands for (what errors and
    /// messages name).
    package static func webSocketURL(forHTTP url: URL?) -> URL? {
        guard let url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        switch components.scheme?.lowercased() {
        case "http": components.scheme = "ws"
        case "https": components.scheme = "wss"
        default: return url
        }
        return components.url ?? url
    }

    /// A new `Sec-WebSocket-Key`: 16 random bytes, base64.
    package static func makeKey() -> String {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
    }

    /// The `Sec-WebSocket-Accept` a server must answer `key` with: base64 of the SHA-1 of the
    /// key and the GUID.
    package static func acceptValue(forKey key: String) -> String {
        Data(SHA1.hash(Array((key + guid).utf8))).base64EncodedString()
    }

    /// The request head as bytes: `GET` of the URL's path and query over HTTP/1.1, `Host`,
    /// the upgrade fields, the subprotocols offered, then `fields` (the session's and the
    /// request's, cookies), except the ones the handshake sets itself.
    ///
    /// The request target is the URL's own percent-encoded text, as libcurl sends a plain
    /// `GET`'s: decoding it would turn `%0D%0A` into a line break that writes header lines
    /// into the head, and `%20` or `%3F` into a space or a `?` that cut the target short. No
    /// byte that could end a line or a field reaches the head: a byte outside visible ASCII
    /// left in the target is percent-encoded, and a host, field name or field value with one
    /// is refused (`invalidURL`, `invalidHeader`) before anything is sent.
    package static func requestBytes(
        url: URL, key: String, protocols: [String], fields: HTTPFields, offersCompression: Bool = false
    ) throws(CourierError) -> [UInt8] {
        let path = url.path(percentEncoded: true)
        var target = path.isEmpty ? "/" : path
        if let query = url.query(percentEncoded: true) { target += "?" + query }
        target = percentEncodingInvisibleBytes(target)
        let defaultPort = HostName.defaultPort(forScheme: url.scheme)
        var host = url.host ?? ""
        // The decoded host: `%0D%0A` in a host name must not become a line break either.
        guard !host.isEmpty, host.utf8.allSatisfy(isVisibleASCII) else {
            throw .invalidURL(
                .init(url: url, message: "The WebSocket URL's host \(host.debugDescription) is not a valid host name"))
        }
        if host.contains(":") { host = "[\(host)]" }
        if let port = url.port, port != defaultPort { host += ":\(port)" }
        var text = "GET \(target) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        if !protocols.isEmpty { text += "Sec-WebSocket-Protocol: \(protocols.joined(separator: ", "))\r\n" }
        if offersCompression { text += "Sec-WebSocket-Extensions: \(WebSocketDeflateParameters.offer)\r\n" }
        let own: Set<String> = [
            "host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
            "sec-websocket-extensions", "content-length", "transfer-encoding",
        ]
        for field in fields where !own.contains(field.name.canonicalName) {
            // `HTTPField` keeps CR, LF and NUL out of what it holds; checked again here, where
            // one would split the head, with the other controls RFC 9110 section 5.5 forbids.
            guard !field.name.rawName.isEmpty, field.name.rawName.utf8.allSatisfy(isVisibleASCII) else {
                throw .invalidHeader(
                    .init(url: url, message: "'\(field.name.rawName.debugDescription)' is not a valid header name"))
            }
            guard field.value.utf8.allSatisfy(isFieldValueByte) else {
                throw .invalidHeader(
                    .init(
                        url: url,
                        message:
                            "The value of header '\(field.name.rawName)' contains a control character: \(field.value.debugDescription)"
                    ))
            }
            text += "\(field.name.rawName): \(field.value)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// `target` with every byte outside visible ASCII (controls, space, DEL, non-ASCII)
    /// percent-encoded; a target without one comes back as it is.
    static func percentEncodingInvisibleBytes(_ target: String) -> String {
        guard !target.utf8.allSatisfy(isVisibleASCII) else { return target }
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in target.utf8 {
            if isVisibleASCII(byte) {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func isVisibleASCII(_ byte: UInt8) -> Bool { (0x21...0x7E).contains(byte) }

    /// RFC 9110's field-vchar, space and tab: no control character but the tab.
    private static func isFieldValueByte(_ byte: UInt8) -> Bool { byte == 0x09 || (byte >= 0x20 && byte != 0x7F) }

    /// What the server's answer to the handshake says.
    package struct Answer: Sendable {
        /// Why the answer does not open a WebSocket; nil when it does.
        package var failure: String?
        /// The subprotocol the server chose, if any.
        package var `protocol`: String?
        /// permessage-deflate, when it was offered and the server agreed.
        package var compression: WebSocketDeflateParameters?
    }

    /// Checks the server's answer: a 101 with the upgrade fields and the accept value for
    /// `key`, a subprotocol among `protocols` if any, and no extension but permessage-deflate
    /// when `offeredCompression`.
    package static func check(
        _ response: HTTPResponse, key: String, protocols: [String], offeredCompression: Bool = false
    ) -> Answer {
        func failed(_ message: String) -> Answer { Answer(failure: message) }
        guard response.status.code == 101 else {
            return failed("The server answered \(response.status.code) instead of 101 Switching Protocols")
        }
        let fields = response.headerFields
        guard fields[.upgrade]?.lowercased() == "websocket" else {
            return failed("The server's 101 does not say Upgrade: websocket")
        }
        guard FieldList.lowercasedItems(fields[values: .connection]).contains("upgrade") else {
            return failed("The server's 101 does not say Connection: Upgrade")
        }
        guard fields[HTTPField.Name("Sec-WebSocket-Accept")!] == acceptValue(forKey: key) else {
            return failed("The server's Sec-WebSocket-Accept does not answer the key")
        }
        var answer = Answer()
        let extensions = fields[values: HTTPField.Name("Sec-WebSocket-Extensions")!].joined(separator: ", ")
        if !extensions.trimmingCharacters(in: .whitespaces).isEmpty {
            guard offeredCompression else {
                return failed("The server chose extensions that were not offered: \(extensions)")
            }
            switch WebSocketDeflateParameters.parse(extensions) {
            case .success(let parameters): answer.compression = parameters
            case .failure(let error): return failed(error.message)
            }
        }
        guard let chosen = fields[HTTPField.Name("Sec-WebSocket-Protocol")!] else { return answer }
        guard protocols.contains(chosen) else {
            return failed("The server chose the subprotocol \(chosen), which was not offered")
        }
        answer.protocol = chosen
        return answer
    }
}

/// SHA-1 (FIPS 180-4), for the handshake's accept value only: not for anything secret.
enum SHA1 {
    static func hash(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8((bits >> UInt64(shift)) & 0xFF)) }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: padded.count, by: 64) {
            for index in 0..<16 {
                let base = chunk + index * 4
                w[index] =
                    UInt32(padded[base]) << 24 | UInt32(padded[base + 1]) << 16 | UInt32(padded[base + 2]) << 8
                    | UInt32(padded[base + 3])
            }
            for index in 16..<80 {
                let value = w[index - 3] ^ w[index - 8] ^ w[index - 14] ^ w[index - 16]
                w[index] = value << 1 | value >> 31
            }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for index in 0..<80 {
                let (f, k): (UInt32, UInt32)
                switch index {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let temp = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[index]
                (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, temp)
            }
            h[0] = h[0] &+ a
            h[1] = h[1] &+ b
            h[2] = h[2] &+ c
            h[3] = h[3] &+ d
            h[4] = h[4] &+ e
        }
        return h.flatMap { [UInt8($0 >> 24), UInt8(($0 >> 16) & 0xFF), UInt8(($0 >> 8) & 0xFF), UInt8($0 & 0xFF)] }
    }
}
