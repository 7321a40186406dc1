/**
 * TurnKit's failure converter (decision 81): a failure's message and stack trace travel in its
 * `encodedAttributes` payload, which the payload codecs seal like every other payload, so an
 * error text (a provider's answer, a tool's error, a tenant's name) is never plain in a
 * history when the codec is on. Without a codec the payload is plain JSON, and every SDK and
 * the Web UI read the message from it.
 *
 * Workers load it by path: into the workflow bundle (worker-bundles.ts) and for activities
 * (`dataConverter.failureConverterPath`). It imports nothing but @temporalio/common, so it
 * bundles into the workflow sandbox.
 */
import type { PayloadConverter, ProtoFailure, SerializationContext } from '@temporalio/common';
import { DefaultFailureConverter } from '@temporalio/common';

const ENCODED_MESSAGE = 'Encoded failure';

class TurnKitFailureConverter extends DefaultFailureConverter {
  constructor() {
    super({ encodeCommonAttributes: false });
  }

  /**
   * As `encodeCommonAttributes: true`, except that a failure already encoded (an activity's
   * failure the workflow passes on keeps its proto) keeps its encoded attributes instead of
   * being encoded again; the plain message and stack that decoding put back on it are dropped.
   */
  override errorToFailure(
    err: unknown,
    payloadConverter: PayloadConverter,
    context?: SerializationContext,
  ): ProtoFailure {
    const failure = super.errorToFailure(err, payloadConverter, context);
    if (failure.encodedAttributes) return { ...failure, message: ENCODED_MESSAGE, stackTrace: '' };
    const { message, stackTrace } = failure;
    return {
      ...failure,
      message: ENCODED_MESSAGE,
      stackTrace: '',
      encodedAttributes: payloadConverter.toPayload({ message, stack_trace: stackTrace }, context),
    };
  }
}

export const failureConverter = new TurnKitFailureConverter();
