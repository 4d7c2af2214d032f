import Foundation
import Testing

@testable import CourierTransport

/// `BodyDecoder` on its own: each coding, chains of them, codings it does not know, data that
/// is not in its coding, and a consumer that refuses output part way (the engine's pause).
@Suite struct BodyDecoderTests {
    /// `Courier decodes this. ` 200 times.
    static let plain = Data(String(repeating: "Courier decodes this. ", count: 200).utf8)
    /// `plain`, by zstd 1.5 (`zstd -19`) and by brotli (`brotlicffi.compress`).
    static let zstd = Data(base64Encoded: "KLUv/WQwEPUAALBDb3VyaWVyIGRlY29kZXMgdGhpcy4gAQAuIvvZBDYd6FY=")!
    static let brotli = Data(base64Encoded: "Gy8R+B2JsY2Kd/tDGqkaqusxsjI5DVKW9qYWOqxKOAh+jbHWTY0AAA==")!

    /// `plain` by Python's zlib: gzip, zlib's wrapper, raw deflate, and gzip over zlib's wrapper.
    static let gzip = Data(
        base64Encoded: "H4sIAAAAAAAAA+3IQQ3AIBAAMCunYCaQApfsXiQw/CNk7bNtnlW5YmSfI3d8b+0nmrXWWmuttdZaa+1v9wIZ"
            + "hG3wMBEAAA==")!
    static let zlibWrapped = Data(
        base64Encoded: "eJztyEENwCAQADArp2AmkAKX7F4kMPwjZO2zbZ5VuWJknyN3fG/tJ5q11lprrbXWWmvtb/cCbBQ4iw==")!
    static let rawDeflate = Data(
        base64Encoded: "7chBDcAgEAAwK6dgJpACl+xeJDD8I2Tts22eVbliZJ8jd3xv7SeatdZaa6211lpr7W/3Ag==")!
    static let gzipOverZlib = Data(
        base64Encoded:
            "H4sIAAAAAAAAA6uY8/aEI+8BBQEGA+3lCWoTmKa/iVMx+KOc8nZz7rzQnUkp85XLa/Lfqs/aei0qey2IeJv/nSlHxKIbAJ6KCAs6AAAA")!

    /// Decodes `input` fed in pieces of `piece` bytes, taking every piece of output.
    static func decode(_ input: Data, codings: [String], piece: Int = 1000) throws -> Data? {
        guard let decoder = BodyDecoder(codings: codings) else { return nil }
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 16)
        defer { scratch.deallocate() }
        var output = Data()
        var offset = 0
        while offset < input.count {
            let end = min(offset + piece, input.count)
            let done = try input[offset..<end].withUnsafeBytes { bytes in
                try decoder.decode(bytes, scratch: scratch) { decoded in
                    output.append(contentsOf: decoded)
                    return .accepted
                }
            }
            #expect(done)
            offset = end
        }
        return output
    }

    @Test(arguments: [(["gzip"], gzip), (["x-gzip"], gzip), (["deflate"], zlibWrapped), (["deflate"], rawDeflate)])
    func zlibCodingsAreTakenOff(codings: [String], coded: Data) throws {
        for piece in [1, 7, 1000] {
            #expect(try Self.decode(coded, codings: codings, piece: piece) == Self.plain)
        }
    }

    @Test func brotliAndZstdAreTakenOffWhenTheSystemHasThem() throws {
        if BodyDecoder.decodes("br") {
            #expect(try Self.decode(Self.brotli, codings: ["br"], piece: 5) == Self.plain)
            #expect(BodyDecoder.acceptEncoding.contains("br"))
        }
        if BodyDecoder.decodes("zstd") {
            #expect(try Self.decode(Self.zstd, codings: ["zstd"], piece: 5) == Self.plain)
            #expect(BodyDecoder.acceptEncoding.contains("zstd"))
        }
        #expect(BodyDecoder.acceptEncoding.hasPrefix("gzip, deflate"))
    }

    @Test func twoCodingsAreTakenOffLastAppliedFirst() throws {
        #expect(try Self.decode(Self.gzipOverZlib, codings: ["deflate", "gzip"]) == Self.plain)
        #expect(try Self.decode(Self.gzipOverZlib, codings: ["deflate", "identity", "gzip"]) == Self.plain)
    }

    @Test func nothingToDecodeOrACodingNotKnownIsNoDecoder() {
        #expect(BodyDecoder(codings: []) == nil)
        #expect(BodyDecoder(codings: ["identity"]) == nil)
        #expect(BodyDecoder(codings: ["arizona"]) == nil)
        #expect(BodyDecoder(codings: ["gzip", "arizona"]) == nil)
        #expect(!BodyDecoder.decodes("compress"))
    }

    @Test func dataNotInItsCodingThrows() {
        #expect(throws: BodyDecoder.Failure.self) {
            _ = try Self.decode(Data("this was never gzip at all".utf8), codings: ["gzip"])
        }
    }

    @Test func bytesAfterTheEndOfTheStreamAreIgnored() throws {
        let coded = Self.gzip + Data("trailing".utf8)
        #expect(try Self.decode(coded, codings: ["gzip"]) == Self.plain)
    }

    /// The consumer refuses every other piece: the decoder keeps the refused piece and the
    /// input it has not decoded, and `resume` hands them over in order, nothing lost or twice.
    @Test func outputRefusedPartWayIsHeldBackAndResumedInOrder() throws {
        let coded = Self.gzip
        let decoder = try #require(BodyDecoder(codings: ["gzip"]))
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 16)
        defer { scratch.deallocate() }
        var output = Data()
        var calls = 0
        let deliver: (UnsafeRawBufferPointer) -> SinkWrite = { piece in
            calls += 1
            guard calls % 2 == 0 else { return .pause }
            output.append(contentsOf: piece)
            return .accepted
        }
        var done = try coded.withUnsafeBytes { try decoder.decode($0, scratch: scratch, deliver: deliver) }
        var rounds = 0
        while !done || decoder.isHoldingBack {
            done = try decoder.resume(scratch: scratch, deliver: deliver)
            rounds += 1
            #expect(rounds < 1000)
            if rounds >= 1000 { break }
        }
        #expect(output == Self.plain)
    }
}
