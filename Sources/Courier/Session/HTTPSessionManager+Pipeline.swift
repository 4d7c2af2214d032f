@_spi(CourierInternals) import CourierCore
import CourierJSON
import CourierPipeline
import CourierSerialization
import CourierTransport
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Prepares one call and runs it through the pipeline (interceptors, `adapt(_:)`, the
    /// cache, the transport, `process(_:)`): the response before serialization.
    /// `serialize` sees the response before it is returned; what it throws fails the attempt
    /// (and may be retried).
    nonisolated func performRaw(
        _ call: Call, reporters: TransferReporters? = nil, sink: (any ResponseSink)? = nil,
        register: (@Sendable (any TransportTransfer) -> Void)? = nil, serialize: (RawResponse) throws -> Void = { _ in }
    ) async throws -> RawResponse {
        let prepared = try prepareForPipeline(call, sink: sink)
        return try await pipeline.perform(
            prepared, hooks: self, reporters: reporters, sink: sink, register: register, serialize: serialize)
    }

    /// Prepares, sends, processes and serializes one call.
    nonisolated func perform<Serializer: ResponseSerializer>(
        _ call: Call, serializer: Serializer, reporters: TransferReporters? = nil,
        register: (@Sendable (any TransportTransfer) -> Void)? = nil
    ) async throws -> DataResponse<Serializer.Value> {
        try await perform(
            prepareForPipeline(call, sink: nil), serializer: serializer, reporters: reporters, register: register)
    }

    /// A data call prepared from its parts. Synchronous and not inlined, so that the call's
    /// parts stay out of the frames of the async functions that wait for the response.
    @inline(never)
    nonisolated func prepared(
        _ method: HTTPRequest.Method, _ path: String, parameters: JSON?, headers: [String: String],
        options: RequestOptions
    ) throws -> PreparedRequest {
        try prepareForPipeline(
            Call(method: method, path: path, parameters: parameters, headers: headers, options: options), sink: nil)
    }

    /// Sends, processes and serializes one prepared call.
    nonisolated func perform<Serializer: ResponseSerializer>(
        _ prepared: PreparedRequest, serializer: Serializer, reporters: TransferReporters? = nil,
        register: (@Sendable (any TransportTransfer) -> Void)? = nil
    ) async throws -> DataResponse<Serializer.Value> {
        var value: Serializer.Value?
        let raw = try await pipeline.perform(
            prepared, hooks: self, reporters: reporters, register: register,
            serialize: { value = try serializer.serialize($0) })
        return DataResponse(raw: raw, value: value!)
    }

    /// The call prepared (serialized, not adapted), after the checks of a background session.
    ///
    /// Not inlined: request building is synchronous, and inlined into the async callers its
    /// temporaries would take room in their frames, which live as long as the request.
    @inline(never)
    private nonisolated func prepareForPipeline(_ call: Call, sink: (any ResponseSink)?) throws -> PreparedRequest {
        let prepared = try prepare(call)
        if let background {
            try background.checkIdentifier()
            guard sink is DownloadSink || prepared.body?.isFile == true else {
                throw CourierError.unsupportedInBackgroundSession(
                    .init(message: "A background session runs downloads and uploads from files only, not data tasks"))
            }
        }
        return prepared
    }
}

/// The manager's overridable methods, as the pipeline runs them: `adapt(_:)` last among the
/// adapters of each attempt, `process(_:)` on each response before serialization.
extension HTTPSessionManager: SessionHooks {}
