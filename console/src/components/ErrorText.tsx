import { ApiError } from '../api.ts';

/** The words of an error: an ApiError's messages as the API wrote them, else its message. */
export function errorMessages(error: unknown): string[] {
  if (error === undefined || error === null) return [];
  if (error instanceof ApiError) return error.messages;
  if (error instanceof Error) return [error.message];
  return [String(error)];
}

/**
 * The API's own words next to what caused them; role="alert" so a screen reader says them.
 * `id` lets a control point at it with aria-describedby.
 */
export function ErrorText({ error, id }: { error: unknown; id?: string }) {
  const words = errorMessages(error);
  if (words.length === 0) return null;
  return (
    <div class="error" role="alert" id={id}>
      {words.length === 1 ? (
        words[0]
      ) : (
        <ul>
          {words.map((w) => (
            <li key={w}>{w}</li>
          ))}
        </ul>
      )}
    </div>
  );
}
