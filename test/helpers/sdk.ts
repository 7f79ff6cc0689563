import assert from 'node:assert/strict';
import { SDKError } from 'livepeer/models/errors/sdkerror.js';

/** The SDKError of a `livepeer` SDK call the server refused, or a failure when the call succeeds. */
export async function refused(p: Promise<unknown>): Promise<SDKError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SDKError) return err;
    throw err;
  }
  assert.fail('the call succeeded');
}
