// `import Courier` brings the whole public API: the types that live in the lower layers are
// re-exported from here, and so is swift-http-types, whose `HTTPRequest`, `HTTPResponse` and
// `HTTPFields` are the messages Courier's API speaks (an interceptor is written with them).
@_exported import CourierCore
@_exported import CourierJSON
@_exported import CourierPipeline
@_exported import CourierSerialization
@_exported import CourierStorage
@_exported import CourierTransport
@_exported import HTTPTypes
