import CCourierSystem
import Foundation

/// permessage-deflate (RFC 7692) as the server agreed to it: whether each side keeps its
/// compression window between messages, and the window sizes.
package struct WebSocketDeflateParameters: Sendable, Hashable {
    /// The server starts every message with an empty window.
    package var serverNoContextTakeover = false
    /// The client (Courier) starts every message with an empty window.
    package var clientNoContextTakeover = false
    /// The server's window: 2^bits bytes.
    package var serverMaxWindowBits = 15
    /// Courier's window: 2^bits bytes.
    package var clientMaxWindowBits = 15

    package init() {}

    /// The offer Courier sends: permessage-deflate, with any window the server likes for the
    /// client's side.
    package static let offer = "permessage-deflate; client_max_window_bits"

    /// The server's `Sec-WebSocket-Extensions` read as an answer to ``offer``: the parameters,
    /// or why they cannot be used (section 7.1: one extension, known parameters each at most
    /// once, windows of 8 to 15 bits).
    package static func parse(_ value: String) -> Result<WebSocketDeflateParameters, WebSocketProtocolError> {
        func failure(_ message: String) -> Result<WebSocketDeflateParameters, WebSocketProtocolError> {
            .failure(.protocolError("The server's permessage-deflate answer \(value.debugDescription): \(message)"))
        }
        let extensions = value.split(separator: ",", omittingEmptySubsequences: true)
        guard extensions.count == 1 else { return failure("one extension was offered") }
        let parts = extensions[0].split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.first?.lowercased() == "permessage-deflate" else {
            return failure("an extension that was not offered")
        }
        var parameters = WebSocketDeflateParameters()
        var seen: Set<String> = []
        for part in parts.dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            let name = pair[0].lowercased()
            var argument = pair.count > 1 ? pair[1] : nil
            if let quoted = argument, quoted.count >= 2, quoted.hasPrefix("\""), quoted.hasSuffix("\"") {
                argument = String(quoted.dropFirst().dropLast())
            }
            guard seen.insert(name).inserted else { return failure("\(name) twice") }
            switch name {
            case "server_no_context_takeover", "client_no_context_takeover":
                guard argument == nil else { return failure("\(name) takes no value") }
                if name == "server_no_context_takeover" {
                    parameters.serverNoContextTakeover = true
                } else {
                    parameters.clientNoContextTakeover = true
                }
            case "server_max_window_bits", "client_max_window_bits":
                guard let argument, argument.first != "0", let bits = Int(argument), (8...15).contains(bits) else {
                    return failure("\(name) needs a number of bits from 8 to 15")
                }
                if name == "server_max_window_bits" {
                    parameters.serverMaxWindowBits = bits
                } else {
                    // zlib's raw deflate has no 8-bit window: it would write a 9-bit one, which a
                    // server that asked for 8 cannot read.
                    guard bits >= 9 else { return failure("a client window of 8 bits, which zlib cannot write") }
                    parameters.clientMaxWindowBits = bits
                }
            default:
                return failure("the unknown parameter \(name)")
            }
        }
        return .success(parameters)
    }
}

/// One WebSocket's compressor and decompressor (zlib's raw deflate), as agreed. Used by one
/// owner at a time (a connection on its engine thread, a frame reader), hence
/// `@unchecked Sendable`.
package final class WebSocketDeflater: @unchecked Sendable {
    package let parameters: WebSocketDeflateParameters
    private let compressor: OpaquePointer
    private let decompressor: OpaquePointer

    /// Both directions' state; nil when zlib cannot allocate it.
    package init?(_ parameters: WebSocketDeflateParameters) {
        guard let compressor = courier_raw_zlib_create(1, Int32(parameters.clientMaxWindowBits)) else { return nil }
        guard let decompressor = courier_raw_zlib_create(0, 15) else {
            courier_raw_zlib_free(compressor)
            return nil
        }
        self.parameters = parameters
        self.compressor = compressor
        self.decompressor = decompressor
    }

    deinit {
        courier_raw_zlib_free(compressor)
        courier_raw_zlib_free(decompressor)
    }

    /// The trailer of a sync flush, which a message leaves out (section 7.2.1).
    private static let syncTrailer: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    /// A message's payload compressed (section 7.2.1): deflated with a sync flush, its
    /// trailing `00 00 FF FF` removed.
    package func compress(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard case .output(var output) = Self.flush(bytes, through: compressor, limit: .max, expected: bytes.count / 2)
        else {
            // deflate refuses data only when its own state is broken.
            preconditionFailure("zlib could not compress a WebSocket message")
        }
        if output.count >= 4, Array(output.suffix(4)) == Self.syncTrailer {
            output.removeLast(4)
        } else if output.isEmpty {
            // Nothing since the last flush (an empty message, with the window kept): zlib writes
            // no block at all. An empty stored block without its trailer stands for it (section
            // 7.2.3.6), so that the receiver's appended trailer still ends a block.
            output = [0x00]
        }
        if parameters.clientNoContextTakeover { courier_raw_zlib_reset(compressor) }
        return output
    }

    /// A compressed message's payload decompressed (section 7.2.2), at most `limit` bytes:
    /// more fails with 1009 (a small message may inflate to gigabytes), bytes that are not
    /// deflate with 1007.
    package func decompress(_ payload: [UInt8], limit: Int) throws(WebSocketProtocolError) -> [UInt8] {
        let input = payload + Self.syncTrailer
        let result = input.withUnsafeBytes { Self.flush($0, through: decompressor, limit: limit, expected: 0) }
        switch result {
        case .output(let output):
            if parameters.serverNoContextTakeover { courier_raw_zlib_reset(decompressor) }
            return output
        case .invalid:
            throw WebSocketProtocolError(1007, "A compressed message that is not valid deflate data")
        case .tooLarge:
            throw WebSocketProtocolError(1009, "A message over the limit of \(limit) bytes once decompressed")
        }
    }

    /// What running bytes through zlib gave.
    private enum Flushed {
        case output([UInt8])
        /// zlib refused the bytes (not deflate data).
        case invalid
        /// The output passed the limit.
        case tooLarge
    }

    /// `input` run through `zlib` (compressing or decompressing) with a sync flush, in chunks,
    /// at most `limit` bytes out; `expected` sizes the output's first allocation.
    private static func flush(
        _ input: UnsafeRawBufferPointer, through zlib: OpaquePointer, limit: Int, expected: Int
    ) -> Flushed {
        var output: [UInt8] = []
        output.reserveCapacity(expected + 64)
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        var offset = 0
        while true {
            var consumed = 0
            var produced = 0
            let result = chunk.withUnsafeMutableBytes { out in
                courier_raw_zlib_step(
                    zlib, input.baseAddress.map { $0 + offset }, input.count - offset, 1, out.baseAddress, out.count,
                    &consumed, &produced)
            }
            guard result == 0 else { return .invalid }
            offset += consumed
            guard output.count + produced <= limit else { return .tooLarge }
            output.append(contentsOf: chunk[0..<produced])
            // Done when zlib had room to spare: all input taken and the flush written out.
            if offset == input.count && produced < chunk.count { return .output(output) }
            // Input left, and zlib took none of it and wrote nothing: it cannot go on.
            if consumed == 0 && produced == 0 { return .invalid }
        }
    }
}
