// `import CourierOpenAPI` is enough: the manager, its configuration and its errors come with it.
@_exported import Courier
