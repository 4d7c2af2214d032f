import CCourierSystem

/// Takes the content codings (and, where the transport leaves them, the transfer codings) off a
/// response body as it arrives: gzip and deflate with zlib, br and zstd with libbrotlidec and
/// libzstd when the system has them (RFC 9110 section 8.4.1). A response in a coding that is
/// not among them is not decoded at all: its body is handed on as it came, with its
/// `Content-Encoding`, as browsers do.
///
/// The decoder owns what it has taken and not yet handed on, so that its consumer can stop it
/// at any point: `decode` takes the whole input, and when a piece of output is refused
/// (`SinkWrite.pause`), it keeps that piece and the input it has not decoded yet, and `resume`
/// goes on with them. Engine thread only.
package final class BodyDecoder {
    /// The stages in decoding order (the coding applied last is undone first).
    private var stages: [OpaquePointer]
    /// Decoded output that was refused, handed on first when decoding resumes.
    private var pending: [UInt8] = []
    /// Input of the first stage taken and not yet decoded (after a refusal).
    private var carry: [UInt8] = []
    /// The first stage's coded stream ended: what follows is ignored.
    private var ended = false

    /// A decoder for a body whose codings, in the order they were applied (as
    /// `Content-Encoding` lists them, and the transfer codings before `chunked`), are
    /// `codings`; nil when there is nothing to decode (none, or `identity` only) or when one
    /// of them is a coding Courier does not decode.
    package init?(codings: [String]) {
        var kinds: [Int32] = []
        for name in codings {
            let lower = name.lowercased()
            if lower == "identity" { continue }
            guard let kind = Self.kind(of: lower), courier_decoder_available(kind) != 0 else { return nil }
            kinds.append(kind)
        }
        guard !kinds.isEmpty else { return nil }
        var stages: [OpaquePointer] = []
        for kind in kinds.reversed() {
            guard let stage = courier_decoder_create(kind) else {
                for made in stages { courier_decoder_free(made) }
                return nil
            }
            stages.append(stage)
        }
        self.stages = stages
    }

    deinit {
        for stage in stages { courier_decoder_free(stage) }
    }

    /// The codings Courier decodes in this process, as an `Accept-Encoding` value lists them
    /// (`gzip, deflate, br, zstd` when the system has libbrotlidec and libzstd).
    package static let acceptEncoding: String = {
        var names = ["gzip", "deflate"]
        if courier_decoder_available(Int32(courier_coding_brotli)) != 0 { names.append("br") }
        if courier_decoder_available(Int32(courier_coding_zstd)) != 0 { names.append("zstd") }
        return names.joined(separator: ", ")
    }()

    /// Whether Courier decodes the coding `name` (`identity` included).
    package static func decodes(_ name: String) -> Bool {
        let lower = name.lowercased()
        if lower == "identity" { return true }
        guard let kind = kind(of: lower) else { return false }
        return courier_decoder_available(kind) != 0
    }

    private static func kind(of name: String) -> Int32? {
        switch name {
        case "gzip", "x-gzip": Int32(courier_coding_gzip)
        case "deflate": Int32(courier_coding_deflate)
        case "br": Int32(courier_coding_brotli)
        case "zstd": Int32(courier_coding_zstd)
        default: nil
        }
    }

    /// Whether output was refused and is kept, or input waits to be decoded.
    package var isHoldingBack: Bool { !pending.isEmpty || !carry.isEmpty }

    /// What went wrong: the body is not in the coding it says.
    package struct Failure: Error {
        /// The coding whose data was malformed, in words.
        package var message: String
    }

    /// Decodes all of `input`, handing the output to `deliver` in pieces of at most
    /// `scratch.count` bytes. Returns false when `deliver` refused a piece (`.pause`): the
    /// piece and the rest of the input are kept for `resume`. `.failed` stops decoding.
    package func decode(
        _ input: UnsafeRawBufferPointer, scratch: UnsafeMutableRawBufferPointer,
        deliver: (UnsafeRawBufferPointer) -> SinkWrite
    ) throws(Failure) -> Bool {
        precondition(!isHoldingBack, "decode(_:) while output is held back: resume(...) first")
        let taken = try run(input, scratch: scratch, deliver: deliver)
        if taken < input.count { carry = Array(UnsafeRawBufferPointer(rebasing: input[taken...])) }
        return taken == input.count && pending.isEmpty
    }

    /// Hands on what was held back (the refused piece, then the input not yet decoded).
    /// Returns false when `deliver` refused again.
    package func resume(
        scratch: UnsafeMutableRawBufferPointer, deliver: (UnsafeRawBufferPointer) -> SinkWrite
    ) throws(Failure) -> Bool {
        if !pending.isEmpty {
            let result = pending.withUnsafeBytes { deliver($0) }
            guard case .accepted = result else { return false }
            pending = []
        }
        guard !carry.isEmpty else { return true }
        let input = carry
        carry = []
        let outcome = input.withUnsafeBytes { bytes in
            Result { () throws(Failure) -> Int in try run(bytes, scratch: scratch, deliver: deliver) }
        }
        let taken = try outcome.get()
        if taken < input.count { carry = Array(input[taken...]) }
        return taken == input.count && pending.isEmpty
    }

    /// Decodes from `input` until it is all taken or a piece is refused (kept in `pending`);
    /// returns how much of the input was taken.
    private func run(
        _ input: UnsafeRawBufferPointer, scratch: UnsafeMutableRawBufferPointer,
        deliver: (UnsafeRawBufferPointer) -> SinkWrite
    ) throws(Failure) -> Int {
        guard let base = input.baseAddress else { return 0 }
        var offset = 0
        // Round again while the output filled the scratch space: the coder may hold more
        // output, even with all the input taken.
        var filled = false
        while offset < input.count || filled {
            if ended { return input.count }
            var consumed = 0
            var produced = 0
            let result = courier_decoder_step(
                stages[0], base + offset, input.count - offset, scratch.baseAddress!, scratch.count, &consumed,
                &produced)
            guard result >= 0 else { throw Failure(message: "The body is not in the coding its response names") }
            if result == 1 { ended = true }
            offset += consumed
            filled = produced == scratch.count
            if produced > 0 {
                let piece = UnsafeRawBufferPointer(rebasing: scratch[0..<produced])
                switch try laterStages(piece, deliver: deliver) {
                case .accepted: break
                case .pause: return offset
                case .failed: return input.count
                }
            } else if consumed == 0 {
                // No progress with room to write: the coder waits for input that is not here.
                return input.count
            }
        }
        return offset
    }

    /// `piece` (the first stage's output) through the later stages, whole, then to `deliver`;
    /// a refused result is kept in `pending`. Responses with two codings are rare: the later
    /// stages decode a piece into memory at once.
    private func laterStages(
        _ piece: UnsafeRawBufferPointer, deliver: (UnsafeRawBufferPointer) -> SinkWrite
    ) throws(Failure) -> SinkWrite {
        guard stages.count > 1 else {
            let result = deliver(piece)
            if case .pause = result { pending = Array(piece) }
            return result
        }
        var data = Array(piece)
        var block = [UInt8](repeating: 0, count: 64 << 10)
        for stage in stages.dropFirst() {
            var output: [UInt8] = []
            var offset = 0
            var filled = false
            while offset < data.count || filled {
                var consumed = 0
                var produced = 0
                let result = data.withUnsafeBytes { input in
                    block.withUnsafeMutableBytes { out in
                        courier_decoder_step(
                            stage, input.baseAddress! + offset, input.count - offset, out.baseAddress!, out.count,
                            &consumed, &produced)
                    }
                }
                guard result >= 0 else {
                    throw Failure(message: "The body is not in the codings its response names")
                }
                output += block[0..<produced]
                offset += consumed
                filled = produced == block.count
                if consumed == 0 && produced == 0 { break }
            }
            data = output
        }
        guard !data.isEmpty else { return .accepted }
        let result = data.withUnsafeBytes { deliver($0) }
        if case .pause = result { pending = data }
        return result
    }
}
