import type { ButtonHTMLAttributes, ComponentChildren } from 'preact';

export type ButtonProps = Omit<ButtonHTMLAttributes<HTMLButtonElement>, 'type'> & {
  children: ComponentChildren;
  /** `primary` for the page's main action, `danger` for what cannot be undone. */
  variant?: 'primary' | 'secondary' | 'danger';
  type?: 'button' | 'submit';
  /** Disabled and announced busy while an action runs. */
  busy?: boolean;
};

/** A button that never submits a form by accident (type defaults to "button"). */
export function Button({ variant = 'secondary', type = 'button', busy = false, children, ...rest }: ButtonProps) {
  return (
    <button
      {...rest}
      type={type}
      class={`btn btn-${variant}${rest.class ? ` ${rest.class}` : ''}`}
      disabled={busy || Boolean(rest.disabled)}
      aria-busy={busy || undefined}
    >
      {children}
    </button>
  );
}
