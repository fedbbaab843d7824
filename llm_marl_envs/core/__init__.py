"""Dec-POMDP machinery shared by every env in the suite; it knows nothing about any particular task."""
