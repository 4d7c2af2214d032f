import Foundation

// RFC 6455 framing for the client side of a WebSocket: frames written masked, frames read
// from a server checked and assembled into messages. No I/O here: the connection feeds bytes
// in and sends what the writer returns.

/// A WebSocket frame's opcode (RFC 6455 section 5.2).
package enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// Close, ping and pong: at most 125 bytes, never fragmented.
    package var isControl: Bool { rawValue & 0x8 != 0 }
}

/// A violation of the protocol by the server, with the close code the client answers with
/// (RFC 6455 section 7.4.1): 1002 protocol error, 1007 invalid data, 1009 too big.
package struct WebSocketProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The close code to send.
    package var closeCode: UInt16
    /// What was wrong.
    package var message: String

    package init(_ closeCode: UInt16, _ message: String) {
        self.closeCode = closeCode
        self.message = message
    }

    package var description: String { "\(message) (close code \(closeCode))" }

    static func protocolError(_ message: String) -> WebSocketProtocolError { .init(1002, message) }
}

/// What the reader found in the server's bytes.
package enum WebSocketEvent: Sendable, Hashable {
    /// A whole text message (valid UTF-8).
    case text(String)
    /// A whole binary message.
    case binary([UInt8])
    /// A ping, to be answered with a pong carrying the same bytes.
    case ping([UInt8])
    /// A pong.
    case pong([UInt8])
    /// The server's close frame: its code (nil when it sent none) and reason.
    case close(code: UInt16?, reason: String)
}

extension WebSocketEvent {
    /// Calls `body` with a text or binary message's opcode and bytes in memory (a text's
    /// UTF-8 in place when it is native). Only for messages: control events stop the process.
    package func withMessagePayload<Result>(
        _ body: (WebSocketOpcode, UnsafeRawBufferPointer) throws -> Result
    ) rethrows -> Result {
        switch self {
        case .text(var text): try text.withUTF8 { try body(.text, UnsafeRawBufferPointer($0)) }
        case .binary(let bytes): try bytes.withUnsafeBytes { try body(.binary, $0) }
        default: preconditionFailure("a text or binary message was expected, not \(self)")
        }
    }
}

/// Frames a client writes (RFC 6455 section 5.3: masked with a key of 4 bytes).
package enum WebSocketFrameWriter {
    /// One frame of `payload`, masked with `key` (nil: unmasked, as a server writes, for tests).
    package static func frame(
        _ opcode: WebSocketOpcode, _ payload: some Collection<UInt8>, fin: Bool = true, mask key: UInt32?
    ) -> [UInt8] {
        // Bytes in memory (an array, a native string's UTF-8) are framed without a copy.
        if let frame = payload.withContiguousStorageIfAvailable({
            frame(opcode, bytes: UnsafeRawBufferPointer($0), fin: fin, mask: key)
        }) {
            return frame
        }
        return Array(payload).withUnsafeBytes { frame(opcode, bytes: $0, fin: fin, mask: key) }
    }

    /// One frame of the bytes `payload`: the header, then the payload copied and masked eight
    /// bytes at a time. (Not generic: a generic loop over a collection, called from another
    /// module, ran unspecialized at about 100 ns a byte.)
    package static func frame(
        _ opcode: WebSocketOpcode, bytes payload: UnsafeRawBufferPointer, fin: Bool = true, mask key: UInt32?,
        compressed: Bool = false
    ) -> [UInt8] {
        let length = payload.count
        let lengthBytes = length < 126 ? 0 : length <= 0xFFFF ? 2 : 8
        let headerLength = 2 + lengthBytes + (key == nil ? 0 : 4)
        return [UInt8](unsafeUninitializedCapacity: headerLength + length) { buffer, count in
            buffer[0] = (fin ? 0x80 : 0) | (compressed ? 0x40 : 0) | opcode.rawValue
            let maskBit: UInt8 = key == nil ? 0 : 0x80
            switch lengthBytes {
            case 0: buffer[1] = maskBit | UInt8(length)
            case 2:
                buffer[1] = maskBit | 126
                buffer[2] = UInt8(length >> 8)
                buffer[3] = UInt8(length & 0xFF)
            default:
                buffer[1] = maskBit | 127
                for index in 0..<8 { buffer[2 + index] = UInt8((UInt64(length) >> UInt64(56 - 8 * index)) & 0xFF) }
            }
            let body = UnsafeMutableRawBufferPointer(
                UnsafeMutableBufferPointer(rebasing: buffer[headerLength..<(headerLength + length)]))
            if length > 0 { body.copyMemory(from: payload) }
            count = headerLength + length
            guard let key else { return }
            let keyBytes = [UInt8(key >> 24), UInt8((key >> 16) & 0xFF), UInt8((key >> 8) & 0xFF), UInt8(key & 0xFF)]
            for index in 0..<4 { buffer[2 + lengthBytes + index] = keyBytes[index] }
            // The key four times over eight bytes, in memory order: XOR works whatever the
            // machine's byte order.
            let wide = (keyBytes + keyBytes).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            var offset = 0
            while offset + 8 <= length {
                let masked = body.loadUnaligned(fromByteOffset: offset, as: UInt64.self) ^ wide
                body.storeBytes(of: masked, toByteOffset: offset, as: UInt64.self)
                offset += 8
            }
            while offset < length {
                body[offset] ^= keyBytes[offset & 3]
                offset += 1
            }
        }
    }

    /// A close frame's payload: the code and the reason (cut to fit 125 bytes on a character
    /// boundary).
    package static func closePayload(code: UInt16, reason: String) -> [UInt8] {
        var reasonBytes = Array(reason.utf8)
        while reasonBytes.count > 123 {
            reasonBytes.removeLast()
            while let last = reasonBytes.last, last & 0xC0 == 0x80 { reasonBytes.removeLast() }
            if let last = reasonBytes.last, last >= 0xC0 { reasonBytes.removeLast() }
        }
        return [UInt8(code >> 8), UInt8(code & 0xFF)] + reasonBytes
    }
}

/// Reads a server's frames (RFC 6455 section 5): checks each, answers nothing itself, and
/// returns whole messages and control frames as they complete. A violation is a
/// ``WebSocketProtocolError`` naming the close code, returned after the events that came
/// before it; the reader is then done.
package struct WebSocketFrameReader: Sendable {
    /// The largest message (all its fragments) accepted; a larger one fails with 1009.
    package let maximumMessageSize: Int
    /// The most message bytes (text and binary payloads, decompressed) accepted in all; past
    /// it, the reader fails with 1009. nil: no limit.
    package let maximumTotalSize: Int64?
    /// Message bytes taken so far.
    private var received: Int64 = 0

    private var buffer: [UInt8] = []
    /// The opcode and bytes of a fragmented message being assembled, and whether it is
    /// compressed.
    private var fragmented: (opcode: WebSocketOpcode, payload: [UInt8], compressed: Bool)?
    /// permessage-deflate, once agreed: a message whose first frame has RSV1 set is
    /// decompressed with it (RFC 7692 section 6).
    package var compression: WebSocketDeflater?
    private var failed: WebSocketProtocolError?

    package init(maximumMessageSize: Int = 16 << 20, maximumTotalSize: Int64? = nil) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumTotalSize = maximumTotalSize
    }

    /// Whether a fragmented message is partly read.
    package var isInsideMessage: Bool { fragmented != nil }

    /// Reads `bytes`; returns what completed and, when the bytes break the protocol, the
    /// violation. The events are then the ones that completed before it: the messages a server
    /// sent whole before its mistake are the reader's, whichever read brought the mistake
    /// along. After a violation the reader is done: later reads return it again, and nothing
    /// else.
    package mutating func read(
        _ bytes: some Collection<UInt8>
    ) -> (events: [WebSocketEvent], violation: WebSocketProtocolError?) {
        if let failed { return ([], failed) }
        buffer.append(contentsOf: bytes)
        var events: [WebSocketEvent] = []
        var offset = 0
        do {
            while let (event, consumed) = try nextFrame(from: offset) {
                offset += consumed
                if let event { events.append(event) }
            }
        } catch {
            failed = error
            buffer = []
            fragmented = nil
            return (events, error)
        }
        buffer.removeFirst(offset)
        return (events, nil)
    }

    /// Reads `bytes`; returns what completed, or throws the violation (and drops the events
    /// that completed before it in these bytes: ``read(_:)`` keeps them).
    package mutating func feed(_ bytes: some Collection<UInt8>) throws(WebSocketProtocolError) -> [WebSocketEvent] {
        let (events, violation) = read(bytes)
        if let violation { throw violation }
        return events
    }

    /// The frame that starts at `offset`, when it is all there: its event (nil for a fragment
    /// that does not end a message) and its length.
    private mutating func nextFrame(from offset: Int) throws(WebSocketProtocolError) -> (WebSocketEvent?, Int)? {
        let available = buffer.count - offset
        guard available >= 2 else { return nil }
        let first = buffer[offset]
        let second = buffer[offset + 1]
        let fin = first & 0x80 != 0
        guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else {
            throw .protocolError("A frame with the reserved opcode \(first & 0x0F)")
        }
        // RSV1 marks a compressed message, on its first frame only, once permessage-deflate
        // was agreed; RSV2 and RSV3 mean nothing here.
        let compressed = first & 0x40 != 0
        guard first & 0x30 == 0,
            !compressed || (compression != nil && (opcode == .text || opcode == .binary))
        else {
            throw .protocolError(
                compression == nil
                    ? "A frame with reserved bits set (no extension was agreed)"
                    : "A frame with reserved bits set that permessage-deflate does not allow")
        }
        guard second & 0x80 == 0 else { throw .protocolError("A masked frame from the server") }
        var headerLength = 2
        var length = UInt64(second & 0x7F)
        if length == 126 {
            guard available >= 4 else { return nil }
            length = UInt64(buffer[offset + 2]) << 8 | UInt64(buffer[offset + 3])
            headerLength = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = 0
            for index in 0..<8 { length = length << 8 | UInt64(buffer[offset + 2 + index]) }
            guard length >> 63 == 0 else { throw .protocolError("A frame length with its most significant bit set") }
            headerLength = 10
        }
        if opcode.isControl {
            guard fin else { throw .protocolError("A fragmented \(opcode) frame") }
            guard length <= 125 else { throw .protocolError("A \(opcode) frame of \(length) bytes (at most 125)") }
        }
        let sizeSoFar = opcode.isControl ? 0 : (fragmented?.payload.count ?? 0)
        guard length <= UInt64(maximumMessageSize - sizeSoFar) else {
            throw WebSocketProtocolError(1009, "A message over the limit of \(maximumMessageSize) bytes")
        }
        if !opcode.isControl, let total = maximumTotalSize, received + Int64(sizeSoFar) + Int64(length) > total {
            throw totalExceeded(total)
        }
        guard available - headerLength >= Int(length) else { return nil }
        let start = offset + headerLength
        let payload = Array(buffer[start..<start + Int(length)])
        return (try event(opcode, payload, fin: fin, compressed: compressed), headerLength + Int(length))
    }

    private mutating func event(
        _ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool, compressed: Bool
    )
        throws(WebSocketProtocolError) -> WebSocketEvent?
    {
        switch opcode {
        case .ping: return .ping(payload)
        case .pong: return .pong(payload)
        case .close: return try Self.close(payload)
        case .continuation:
            guard var assembled = fragmented else { throw .protocolError("A continuation frame without a message") }
            fragmented = nil  // the bytes so far have one owner again: appending does not copy them
            assembled.payload += payload
            guard fin else {
                fragmented = assembled
                return nil
            }
            return try message(assembled.opcode, assembled.payload, compressed: assembled.compressed)
        case .text, .binary:
            guard fragmented == nil else { throw .protocolError("A new message before the last one ended") }
            guard fin else {
                fragmented = (opcode, payload, compressed)
                return nil
            }
            return try message(opcode, payload, compressed: compressed)
        }
    }

    /// A whole message: decompressed when it is compressed, counted, then checked.
    private mutating func message(
        _ opcode: WebSocketOpcode, _ payload: [UInt8], compressed: Bool
    ) throws(WebSocketProtocolError) -> WebSocketEvent {
        let bytes =
            if compressed, let compression { try compression.decompress(payload, limit: maximumMessageSize) } else {
                payload
            }
        received += Int64(bytes.count)
        if let total = maximumTotalSize, received > total { throw totalExceeded(total) }
        return try Self.message(opcode, bytes)
    }

    private func totalExceeded(_ total: Int64) -> WebSocketProtocolError {
        WebSocketProtocolError(1009, "The messages passed their limit of \(total) bytes in all")
    }

    private static func message(
        _ opcode: WebSocketOpcode, _ payload: [UInt8]
    ) throws(WebSocketProtocolError)
        -> WebSocketEvent
    {
        guard opcode == .text else { return .binary(payload) }
        guard let text = String(validating: payload, as: UTF8.self) else {
            throw WebSocketProtocolError(1007, "A text message that is not UTF-8")
        }
        return .text(text)
    }

    /// A close frame: no payload, or a valid code and a UTF-8 reason (section 7.4).
    private static func close(_ payload: [UInt8]) throws(WebSocketProtocolError) -> WebSocketEvent {
        guard !payload.isEmpty else { return .close(code: nil, reason: "") }
        guard payload.count >= 2 else { throw .protocolError("A close frame of 1 byte") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard isValidCloseCode(code) else { throw .protocolError("The close code \(code), which may not be sent") }
        guard let reason = String(validating: payload[2...], as: UTF8.self) else {
            throw WebSocketProtocolError(1007, "A close reason that is not UTF-8")
        }
        return .close(code: code, reason: reason)
    }

    /// The codes an endpoint may send (section 7.4): 1000 to 1003, 1007 to 1014, and 3000 to
    /// 4999 for libraries and applications.
    package static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }
}
