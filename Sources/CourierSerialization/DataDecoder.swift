import Foundation

/// Decodes a body into a `Decodable` value, for ``DecodableResponseSerializer``: the seam
/// through which a serializer takes a decoder of your choice (Alamofire calls it `DataDecoder`
/// too).
///
/// `JSONDecoder` and `PropertyListDecoder` conform, so a configured decoder is passed as it is:
///
/// ```swift
/// let decoder = JSONDecoder()
/// decoder.keyDecodingStrategy = .convertFromSnakeCase
/// let serializer = DecodableResponseSerializer(User.self, decoder: decoder)
/// ```
///
/// A `JSONDecoder` (the default) keeps Courier's fast path: where its strategies are the
/// default ones, Courier's own decoder answers first, and only where it gives exactly the
/// answer `JSONDecoder` would. Any other conforming type decodes every body itself.
public protocol DataDecoder: Sendable {
    /// Decodes a value of `type` from `data`, or throws why it cannot.
    func decode<D: Decodable>(_ type: D.Type, from data: Data) throws -> D
}

extension JSONDecoder: DataDecoder {}

extension PropertyListDecoder: DataDecoder {}

/// The decoder a serializer holds: a `JSONDecoder` kept as one, so that the fast path is
/// chosen by a switch per body, not a cast.
enum DecoderChoice: Sendable {
    case json(JSONDecoder)
    case other(any DataDecoder)

    init(_ decoder: any DataDecoder) {
        if let json = decoder as? JSONDecoder {
            self = .json(json)
        } else {
            self = .other(decoder)
        }
    }

    var decoder: any DataDecoder {
        switch self {
        case .json(let decoder): decoder
        case .other(let decoder): decoder
        }
    }

    /// `type` decoded from `data`: with a `JSONDecoder`, the tape decoder first (see
    /// `JSONDecoder.decodeTapeFirst(_:from:)`); with any other, that decoder.
    @inline(__always)
    func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        switch self {
        case .json(let decoder): try decoder.decodeTapeFirst(Value.self, from: data)
        case .other(let decoder): try decoder.decode(Value.self, from: data)
        }
    }
}
