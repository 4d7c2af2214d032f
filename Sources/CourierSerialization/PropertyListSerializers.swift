import CourierCore
import CourierJSON
import Foundation
import HTTPTypes

/// The body decoded from a property list (XML or binary) with `PropertyListDecoder`, as
/// AFNetworking's property-list serializer reads it. Accepts `application/x-plist` by
/// default; an empty body follows the rules of ``DecodableResponseSerializer``.
public struct PropertyListResponseSerializer<Value: Decodable & Sendable>: ResponseSerializer {
    /// The media types property-list serializers accept by default.
    public static var defaultContentTypes: Set<String> { ["application/x-plist", "application/plist"] }

    /// The checks made before decoding.
    public var validation: ResponseValidation

    /// Creates the serializer.
    public init(
        _ type: Value.Type = Value.self, acceptableStatusCodes: some Sequence<Int> = 200..<300,
        acceptableContentTypes: Set<String>? = PropertyListResponseSerializer.defaultContentTypes
    ) {
        validation = ResponseValidation(
            acceptableStatusCodes: acceptableStatusCodes, acceptableContentTypes: acceptableContentTypes)
    }

    /// Validates and decodes the body.
    public func serialize(_ response: RawResponse) throws(CourierError) -> Value {
        try validation.validate(response)
        if response.data.isEmpty {
            guard EmptyBody.isAllowed(for: response), let empty = Value.self as? any EmptyResponse.Type else {
                throw .serializationFailed(
                    response.errorContext("Expected a property list to decode as \(Value.self), but the body is empty"))
            }
            return empty.emptyValue as! Value
        }
        do {
            return try PropertyListDecoder().decode(Value.self, from: response.data)
        } catch {
            throw .serializationFailed(
                response.errorContext(
                    "Cannot decode \(Value.self) from the property list: \(error)",
                    underlying: DecodingFailure(description: "\(error)")))
        }
    }
}

/// Parameters as a property list body (XML by default, `Content-Type: application/x-plist`),
/// or in the query for `queryMethods`, as AFNetworking's property-list request serializer.
/// A `null` anywhere in the parameters has no property-list form: `serializationFailed`, and
/// nothing is sent.
public struct PropertyListRequestSerializer: RequestSerializer {
    /// The methods whose parameters go into the URL query.
    public var queryMethods: Set<HTTPRequest.Method>
    /// XML (the default) or binary.
    public var format: PropertyListSerialization.PropertyListFormat

    /// Creates the serializer.
    public init(
        queryMethods: Set<HTTPRequest.Method> = [.get, .head, .delete],
        format: PropertyListSerialization.PropertyListFormat = .xml
    ) {
        self.queryMethods = queryMethods
        self.format = format
    }

    /// Encodes the parameters as a property list body, or into the query.
    public func serialize(_ request: HTTPRequest, parameters: JSON?) throws(CourierError) -> SerializedRequest {
        guard let parameters else { return SerializedRequest(request: request) }
        if queryMethods.contains(request.method) {
            return try QueryRequestSerializer().serialize(request, parameters: parameters)
        }
        let body: Data
        do {
            body = try PropertyListSerialization.data(
                fromPropertyList: try Self.propertyList(parameters), format: format, options: 0)
        } catch let error as CourierError {
            throw error
        } catch {
            throw .serializationFailed(.init(message: "Cannot write the parameters as a property list: \(error)"))
        }
        return SerializedRequest(request: settingContentType("application/x-plist", on: request), body: body)
    }

    /// The Foundation objects `PropertyListSerialization` writes.
    private static func propertyList(_ value: JSON) throws(CourierError) -> Any {
        switch value {
        case .null:
            throw .serializationFailed(.init(message: "A property list has no null: remove it from the parameters"))
        case .bool(let bool): return NSNumber(value: bool)
        case .int(let int): return NSNumber(value: int)
        case .double(let double): return NSNumber(value: double)
        case .string(let string): return NSString(string: string)
        case .array(let items):
            var array: [Any] = []
            for item in items { array.append(try propertyList(item)) }
            return NSArray(array: array)
        case .object(let members):
            let dictionary = NSMutableDictionary()
            for (key, member) in members { dictionary[NSString(string: key)] = try propertyList(member) }
            return dictionary
        }
    }
}

/// Tries serializers in turn and returns the first one's value that accepts the response's
/// content type, as AFNetworking's compound serializer: one call that reads JSON, a property
/// list or text, whichever the server sent. A serializer that refuses the content type
/// (`unacceptableContentType`) passes the response to the next; any other failure is the
/// result. When none accepts the type, the last refusal is thrown.
///
/// ```swift
/// let either = CompoundResponseSerializer<Settings>([
///     DecodableResponseSerializer(Settings.self), PropertyListResponseSerializer(Settings.self),
/// ])
/// let settings = try await api.GET("settings", serializer: either)
/// ```
public struct CompoundResponseSerializer<Value: Sendable>: ResponseSerializer {
    /// The serializers, in the order they are tried.
    public var serializers: [any ResponseSerializer<Value>]

    /// A serializer trying `serializers` in order.
    public init(_ serializers: [any ResponseSerializer<Value>]) {
        self.serializers = serializers
    }

    /// The first value of a serializer that accepts the content type.
    public func serialize(_ response: RawResponse) throws(CourierError) -> Value {
        var refusal: CourierError?
        for serializer in serializers {
            do {
                return try serializer.serialize(response)
            } catch .unacceptableContentType(let context) {
                refusal = .unacceptableContentType(context)
            }
        }
        throw refusal
            ?? .serializationFailed(response.errorContext("A compound response serializer needs a serializer"))
    }
}
