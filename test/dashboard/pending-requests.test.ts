// The request/response helper the dashboard's layer requests go through.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PendingRequests } from '../../src/shared/pending-requests.js';

test('each request gets a fresh id; its reply yields the request context once', () => {
  const requests = new PendingRequests<string>();
  const a = requests.start('layer a');
  const b = requests.start('layer b');
  assert.notEqual(a, b);
  assert.equal(requests.size, 2);
  assert.equal(requests.settle(b), 'layer b');
  assert.equal(requests.settle(b), undefined, 'a repeated reply is dropped');
  assert.equal(requests.settle(999), undefined, 'a reply nobody asked for is dropped');
  assert.equal(requests.settle(a), 'layer a');
  assert.equal(requests.size, 0);
});

test('after clear (a new snapshot), replies to earlier requests are dropped and new ids do not reuse theirs', () => {
  const requests = new PendingRequests<number>();
  const old = requests.start(1);
  requests.clear();
  assert.equal(requests.settle(old), undefined);
  const fresh = requests.start(2);
  assert.notEqual(fresh, old);
  assert.equal(requests.settle(fresh), 2);
});
