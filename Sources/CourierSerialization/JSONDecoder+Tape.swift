import CourierJSON
import Foundation

extension JSONDecoder {
    /// `type` decoded from `data` as this decoder decodes it: the tape decoder gives the same
    /// answer faster (Documentation/Benchmarks.md has by how much), or none, and then this
    /// decoder decides (errors included). Text nested deeper than `JSON.maximumNestingDepth`
    /// throws the `JSONParsingError` that `JSON(parsing:)` throws for it.
    func decodeTapeFirst<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        if let value = try TapeDecoding.decode(Value.self, from: data, like: self) { return value }
        return try decode(Value.self, from: data)
    }
}

/// The error a serializer carries under `CourierError.serializationFailed(_:)` for a decoding
/// failure: a `JSONParsingError` as it is (text nested too deep), any other as its description
/// (`DecodingError` is not `Sendable`).
func decodingFailure(_ error: any Error) -> any Error & Sendable {
    if let parsing = error as? JSONParsingError { return parsing }
    return DecodingFailure(description: "\(error)")
}
