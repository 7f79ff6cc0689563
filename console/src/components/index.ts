export { Button, type ButtonProps } from './Button.tsx';
export { CopyButton } from './CopyButton.tsx';
export { ErrorText, errorMessages } from './ErrorText.tsx';
export { FeatureOff } from './FeatureOff.tsx';
export { Icon, type IconName } from './Icon.tsx';
export { describedBy, Field } from './Field.tsx';
export { Json } from './Json.tsx';
export { Progress } from './Progress.tsx';
export { PhaseBadge } from './PhaseBadge.tsx';
