// The protocol shared by trainer, host and webview: types plus runtime validation.
export * from './validate.js';
export * from './config.js';
export * from './telemetry.js';
export * from './wire.js';
